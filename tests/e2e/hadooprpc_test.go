package e2e

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	h "github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/hadooprpc/hrpctest"
)

// TestHadoopRPCExactlyOnce: over the Hadoop IPC port of a real server, a
// write resent with its first call id and a retry count (as Hadoop's retry
// policy resends a call whose answer was lost) gets its first answer from
// the engine's request record, while the same write under a new call id is
// run again and answers what a second run answers.
func TestHadoopRPCExactlyOnce(t *testing.T) {
	hrpc := freePort(t)
	s := startServer(t, "", freePort(t), "--hadoop-rpc-addr", hrpc)
	defer s.stop()
	c, err := hrpctest.Dial(hrpc, "root")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	perm := &h.FsPermissionProto{Perm: proto.Uint32(0o755)}
	for _, d := range []string{"/once/a", "/once/b"} {
		var mk h.MkdirsResponseProto
		if err := c.Call("mkdirs", &h.MkdirsRequestProto{Src: proto.String(d), Masked: perm, CreateParent: proto.Bool(true)}, &mk); err != nil || !mk.GetResult() {
			t.Fatalf("mkdirs %s: %v %v", d, err, mk.GetResult())
		}
	}

	// delete: true, then its resubmission true again (from the record);
	// a new delete of the same path is false.
	id := c.NextCallID()
	var del h.DeleteResponseProto
	if err := c.Call("delete", &h.DeleteRequestProto{Src: proto.String("/once/a"), Recursive: proto.Bool(true)}, &del); err != nil || !del.GetResult() {
		t.Fatalf("delete: %v %v", err, del.GetResult())
	}
	del.Reset()
	if err := c.CallAs(id, 1, "delete", &h.DeleteRequestProto{Src: proto.String("/once/a"), Recursive: proto.Bool(true)}, &del); err != nil || !del.GetResult() {
		t.Fatalf("resubmitted delete: %v %v, want its first answer, true", err, del.GetResult())
	}
	del.Reset()
	if err := c.Call("delete", &h.DeleteRequestProto{Src: proto.String("/once/a"), Recursive: proto.Bool(true)}, &del); err != nil || del.GetResult() {
		t.Fatalf("a second delete: %v %v, want false", err, del.GetResult())
	}

	// rename2: done, then its resubmission succeeds again; a new rename2
	// of the same paths fails as HDFS's does.
	id = c.NextCallID()
	r2 := &h.Rename2RequestProto{Src: proto.String("/once/b"), Dst: proto.String("/once/c"), OverwriteDest: proto.Bool(false)}
	if err := c.Call("rename2", r2, &h.Rename2ResponseProto{}); err != nil {
		t.Fatalf("rename2: %v", err)
	}
	if err := c.CallAs(id, 1, "rename2", r2, &h.Rename2ResponseProto{}); err != nil {
		t.Fatalf("resubmitted rename2: %v, want its first answer, success", err)
	}
	err = c.Call("rename2", r2, &h.Rename2ResponseProto{})
	var re *hrpctest.RemoteError
	if !errors.As(err, &re) || re.Class != "org.apache.hadoop.fs.FileAlreadyExistsException" {
		t.Fatalf("a second rename2: %v, want FileAlreadyExistsException", err)
	}

	// The namespace as a listing shows it.
	var ls h.GetListingResponseProto
	if err := c.Call("getListing", &h.GetListingRequestProto{Src: proto.String("/once"), StartAfter: []byte{}, NeedLocation: proto.Bool(false)}, &ls); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ls.GetDirList().GetPartialListing() {
		names = append(names, string(e.GetPath()))
	}
	if strings.Join(names, " ") != "c" {
		t.Fatalf("listing of /once: %q, want [c]", names)
	}
}
