package rpc

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestLocatedBlocksRoundTrip: located blocks survive the wire (encoded,
// decoded) field for field, the last block and the tokens included.
func TestLocatedBlocksRoundTrip(t *testing.T) {
	dn := func(i uint64) namespace.DataNodeInfo {
		return namespace.DataNodeInfo{ID: i, UUID: fmt.Sprint("uuid-", i), StorageID: fmt.Sprint("DS-", i),
			DataAddr: fmt.Sprint("10.0.0.", i, ":9866"), HTTPAddr: fmt.Sprint("10.0.0.", i, ":9864"), Host: fmt.Sprint("h", i), Zone: fmt.Sprint("z", i)}
	}
	b1 := namespace.LocatedBlock{Pool: "BP-1", ID: 1 << 40, GenStamp: 1001, NumBytes: 128 << 20, Offset: 0,
		Targets: []namespace.DataNodeInfo{dn(1), dn(2), dn(3)},
		Token:   namespace.BlockToken{Identifier: []byte{1, 2}, Password: []byte{3}, Kind: "HDFS_BLOCK_TOKEN", Service: "s"}}
	b2 := namespace.LocatedBlock{Pool: "BP-1", ID: 1<<40 + 1, GenStamp: 1002, NumBytes: 7, Offset: 128 << 20,
		Targets: []namespace.DataNodeInfo{dn(2)}, Corrupt: true,
		Token: namespace.BlockToken{Identifier: []byte{4}, Password: []byte{5, 6}, Kind: "HDFS_BLOCK_TOKEN"}}
	in := &namespace.LocatedBlocks{FileLength: 128<<20 + 7, Blocks: []namespace.LocatedBlock{b1, b2},
		UnderConstruction: true, LastBlock: &b2, LastBlockComplete: false}
	wire, err := (&api.Response{Result: &api.Response_LocatedBlocks{LocatedBlocks: LocatedBlocksToProto(in)}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	var resp api.Response
	if err := resp.UnmarshalVT(wire); err != nil {
		t.Fatal(err)
	}
	if out := LocatedBlocksFromProto(resp.GetLocatedBlocks()); !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %+v\nwant %+v", out, in)
	}
	inline := &namespace.LocatedBlocks{FileLength: 6, Inline: true}
	if out := LocatedBlocksFromProto(LocatedBlocksToProto(inline)); !reflect.DeepEqual(out, inline) {
		t.Fatalf("inline decoded %+v", out)
	}
	if BlockRefPtrFromProto(nil) != nil {
		t.Fatal("an unset block reference decodes as a block")
	}
	ref := namespace.BlockRef{ID: 9, GenStamp: 10, NumBytes: 11}
	if got := BlockRefPtrFromProto(BlockRefToProto(ref)); got == nil || *got != ref {
		t.Fatalf("block reference decoded %+v", got)
	}
}

// TestNotYetReplicatedIsBusy: the engine's "not yet replicated" reaches
// the client as a busy error, which a client sends again.
func TestNotYetReplicatedIsBusy(t *testing.T) {
	err := &meta.OpError{Op: "complete", Path: "/f", Err: fmt.Errorf("%w: %w", meta.ErrBusy, namespace.ErrNotYetReplicated)}
	pe := ErrorToProto(err, MethodCompleteBlock.String(), "/f")
	if pe.GetKind() != api.Kind_KIND_BUSY {
		t.Fatalf("kind %v, want KIND_BUSY", pe.GetKind())
	}
	back := ErrorFromProto(pe)
	if !errors.Is(back, meta.ErrBusy) || meta.KindOf(back) != meta.KindBusy {
		t.Fatalf("decoded %v: not busy", back)
	}
}

// TestDataPathMethods: every data-path request names its method and path,
// is routed by that path, and only GetBlockLocations is read-only.
func TestDataPathMethods(t *testing.T) {
	for _, tc := range []struct {
		body any
		m    Method
	}{
		{&api.Request_AddBlock{AddBlock: &api.AddBlockRequest{Path: "/p"}}, MethodAddBlock},
		{&api.Request_CompleteBlock{CompleteBlock: &api.CompleteBlockRequest{Path: "/p"}}, MethodCompleteBlock},
		{&api.Request_GetBlockLocations{GetBlockLocations: &api.GetBlockLocationsRequest{Path: "/p"}}, MethodGetBlockLocations},
		{&api.Request_UpdateBlockForPipeline{UpdateBlockForPipeline: &api.UpdateBlockForPipelineRequest{Path: "/p"}}, MethodUpdateBlockForPipeline},
		{&api.Request_UpdatePipeline{UpdatePipeline: &api.UpdatePipelineRequest{Path: "/p"}}, MethodUpdatePipeline},
		{&api.Request_AbandonBlock{AbandonBlock: &api.AbandonBlockRequest{Path: "/p"}}, MethodAbandonBlock},
		{&api.Request_Fsync{Fsync: &api.FsyncRequest{Path: "/p"}}, MethodFsync},
		{&api.Request_AdditionalDataNode{AdditionalDataNode: &api.AdditionalDataNodeRequest{Path: "/p"}}, MethodAdditionalDataNode},
		{&api.Request_AppendBlock{AppendBlock: &api.AppendBlockRequest{Path: "/p"}}, MethodAppendBlock},
	} {
		req := &api.Request{}
		reflect.ValueOf(req).Elem().FieldByName("Body").Set(reflect.ValueOf(tc.body))
		m, p := MethodOf(req)
		if m != tc.m || p != "/p" || !Routed(m) || m.ReadOnly() != (m == MethodGetBlockLocations) || m.String() == "unknown" {
			t.Fatalf("%T: method %v (%s) path %q routed %v read-only %v", tc.body, m, m, p, Routed(m), m.ReadOnly())
		}
	}
}
