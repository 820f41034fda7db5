package dataxfer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
	dir := t.TempDir()
	cpFile := filepath.Join(dir, "cp.txt")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	pom, _ := filepath.Abs("testdata/hadoop/pom.xml")
	run("mvn", "-q", "-B", "-f", pom, "dependency:build-classpath", "-Dmdep.outputFile="+cpFile)
	cpb, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	cp := strings.TrimSpace(string(cpb))
	classes := filepath.Join(dir, "classes")
	run("javac", "-cp", cp, "-d", classes, "testdata/hadoop/src/main/java/nimbus/Interop.java")

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
