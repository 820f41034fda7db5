package dataxfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// TestHadoopInterop runs Hadoop 3.4.1's own client classes (Sender,
// PacketHeader, PipelineAck, BlockReaderRemote; testdata/hadoop) against
// three Nimbus DataNodes: a pipeline write with a heartbeat and an hsync
// packet, reads of every replica with Hadoop's checksum verification, and
// BLOCK_CHECKSUM against the MD5 Hadoop computes. It needs Java 17 and
// Maven (Hadoop's jars come from Maven Central into ~/.m2) and runs when
// NIMBUS_HADOOP_INTEROP=1:
//
//	NIMBUS_HADOOP_INTEROP=1 go test -run TestHadoopInterop -v ./dataxfer/
func TestHadoopInterop(t *testing.T) {
	if os.Getenv("NIMBUS_HADOOP_INTEROP") != "1" {
		t.Skip("set NIMBUS_HADOOP_INTEROP=1 to run Hadoop's client classes against the server (needs java and mvn)")
	}
	classes, cp := buildJava(t, "testdata/hadoop", "Interop")

	ns := startNodes(t, 3, nil)
	for i, size := range []int{0, 1, 513, 300_007} {
		id := uint64(7000 + i)
		args := []string{"-cp", classes + string(os.PathListSeparator) + cp, "nimbus.Interop", testPool, fmt.Sprint(id), fmt.Sprint(size)}
		for _, n := range ns {
			args = append(args, n.addr)
		}
		out, err := exec.Command("java", args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("Hadoop client, block of %d bytes: %v\n%s", size, err, out)
		}
		// What Hadoop's client wrote is what the stores hold, byte for byte
		// the data java.util.Random(id) made (checked by Hadoop's reads);
		// here: every replica finalized at the right length.
		for _, n := range ns {
			b := Block{Pool: testPool, ID: id, GenStamp: 1001}
			if got := storedBytes(t, n, b.BlockID()); len(got) != size {
				t.Fatalf("replica at %s: %d bytes, want %d", n.addr, len(got), size)
			}
		}
	}
}

// buildJava resolves the classpath of dir/pom.xml with Maven and compiles
// dir's class with javac; it returns the classes directory and the
// classpath.
func buildJava(t *testing.T, dir, class string) (string, string) {
	t.Helper()
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
	tmp := t.TempDir()
	cpFile := filepath.Join(tmp, "cp.txt")
	run := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	pom, _ := filepath.Abs(filepath.Join(dir, "pom.xml"))
	run("mvn", "-q", "-B", "-f", pom, "dependency:build-classpath", "-Dmdep.outputFile="+cpFile)
	cpb, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	classes := filepath.Join(tmp, "classes")
	run("javac", "-cp", strings.TrimSpace(string(cpb)), "-d", classes, filepath.Join(dir, "src/main/java/nimbus", class+".java"))
	return classes, strings.TrimSpace(string(cpb))
}

// TestJavaDataNodes runs dataxfer's client against three of Hadoop
// 3.4.1's own DataNodes (a MiniDFSCluster; testdata/hadoop-dn): it reads a
// block Hadoop wrote from every DataNode and asks each for its
// BLOCK_CHECKSUM, then writes a block the NameNode allocated through the
// three (with an hflush and an hsync on the way), which Hadoop completes
// and reads back; last, it stops the middle DataNode of a pipeline in the
// middle of a block, and the client's error names index 1. Gated like
// TestHadoopInterop:
//
//	NIMBUS_HADOOP_INTEROP=1 go test -run TestJavaDataNodes -v ./dataxfer/
func TestJavaDataNodes(t *testing.T) {
	if os.Getenv("NIMBUS_HADOOP_INTEROP") != "1" {
		t.Skip("set NIMBUS_HADOOP_INTEROP=1 to run the client against Hadoop's DataNodes (needs java and mvn)")
	}
	classes, cp := buildJava(t, "testdata/hadoop-dn", "JavaDataNodes")
	tmp := t.TempDir()
	a, b := randBytes(1, 300_007), randBytes(2, 1_000_003)
	fa, fb := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	os.WriteFile(fa, a, 0o644)
	os.WriteFile(fb, b, 0o644)
	cmd := exec.Command("java", "-cp", classes+string(os.PathListSeparator)+cp, "nimbus.JavaDataNodes", filepath.Join(tmp, "dfs"), fa, fb)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	next := func(prefix string) []string {
		t.Helper()
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) > 0 && (f[0] == prefix || f[0] == "FAIL") {
				if f[0] == "FAIL" {
					t.Fatalf("Hadoop side: %s", lines.Text())
				}
				return f[1:]
			}
		}
		t.Fatalf("Hadoop side ended before %s: %v\n%s", prefix, lines.Err(), tail(stderr.String()))
		return nil
	}
	num := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	c := &Client{Name: "DFSClient_nimbus"}
	ctx := context.Background()

	f := next("READ")
	blk := Block{Pool: f[0], ID: num(f[1]), GenStamp: num(f[2]), NumBytes: int64(num(f[3]))}
	for _, addr := range f[4:] {
		got, err := readAll(t, c, addr, blk, blocktoken.Token{}, 0, int64(len(a)))
		if err != nil {
			t.Fatalf("read %s from Hadoop DataNode %s: %v", blk, addr, err)
		}
		mustEqual(t, "block read from Hadoop DataNode "+addr, got, a)
		got, err = readAll(t, c, addr, blk, blocktoken.Token{}, 1000, 70_000)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "range read from Hadoop DataNode "+addr, got, a[1000:71_000])
		bc, err := c.BlockChecksum(ctx, addr, blk, blocktoken.Token{})
		if err != nil {
			t.Fatalf("checksum from Hadoop DataNode %s: %v", addr, err)
		}
		if want := blocks.ChunkCRCsMD5(a); bc.MD5 != want.MD5 || bc.CRCCount != want.CRCCount {
			t.Fatalf("checksum from Hadoop DataNode %s: %+v, want %+v", addr, bc, want)
		}
	}

	f = next("WRITE")
	wb := Block{Pool: f[0], ID: num(f[1]), GenStamp: num(f[2])}
	var pipeline []Target
	for i, addr := range f[3:] {
		pipeline = append(pipeline, Target{Addr: addr, UUID: fmt.Sprint("dn-", i)})
	}
	bw, err := c.WriteBlock(ctx, wb, blocktoken.Token{}, pipeline, WriteOptions{})
	if err != nil {
		t.Fatalf("pipeline of Hadoop DataNodes: %v", err)
	}
	bw.Write(b[:100_001])
	if err := bw.Flush(ctx); err != nil {
		t.Fatalf("hflush to Hadoop DataNodes: %v", err)
	}
	bw.Write(b[100_001:500_000])
	if err := bw.Sync(ctx); err != nil {
		t.Fatalf("hsync to Hadoop DataNodes: %v", err)
	}
	bw.Write(b[500_000:])
	n, err := bw.Close(ctx)
	if err != nil {
		t.Fatalf("close on Hadoop DataNodes: %v", err)
	}
	fmt.Fprintf(stdin, "WROTE %d\n", n)
	next("OK")

	// The middle Hadoop DataNode stops in the middle of a block: the
	// first reports it (SUCCESS, ERROR) and the client's error names
	// index 1.
	f = next("WRITE")
	wb = Block{Pool: f[0], ID: num(f[1]), GenStamp: num(f[2])}
	pipeline = pipeline[:0]
	for i, addr := range f[3:] {
		pipeline = append(pipeline, Target{Addr: addr, UUID: fmt.Sprint("dn-", i)})
	}
	bw, err = c.WriteBlock(ctx, wb, blocktoken.Token{}, pipeline, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(b[:200_000])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "KILL %s\n", pipeline[1].Addr)
	next("KILLED")
	for off := 200_000; off+10_000 <= len(b) && err == nil; off += 10_000 {
		if _, err = bw.Write(b[off : off+10_000]); err == nil {
			err = bw.Flush(ctx)
		}
	}
	var pe *PipelineError
	if !errors.As(err, &pe) || pe.Index != 1 || pe.Addr != pipeline[1].Addr {
		t.Fatalf("write after Hadoop DataNode 1 stopped: %v, want a PipelineError at index 1", err)
	}
	bw.Abort()
	fmt.Fprintln(stdin, "DONE")
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
