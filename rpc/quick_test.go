package rpc

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api"
)

func TestIsQuick(t *testing.T) {
	cases := []struct {
		req  *api.Request
		want bool
	}{
		{&api.Request{RequestId: 1, Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/a"}}}, true},
		{&api.Request{RequestId: 1, User: "u", Body: &api.Request_List{List: &api.ListRequest{Path: "/"}}}, true},
		{&api.Request{RequestId: 1, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}, true},
		{&api.Request{RequestId: 1, Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/f", Length: 4096}}}, true},
		{&api.Request{RequestId: 1, Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/f", Length: quickReadLimit + 1}}}, false},
		{&api.Request{RequestId: 1, Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/f"}}}, false}, // to the end
		{&api.Request{RequestId: 1, Body: &api.Request_Create{Create: &api.CreateRequest{Path: "/f"}}}, false},
		{&api.Request{RequestId: 1, Body: &api.Request_Delete{Delete: &api.DeleteRequest{Path: "/f"}}}, false},
		{&api.Request{RequestId: 1, Body: &api.Request_Fsck{Fsck: &api.FsckRequest{}}}, false},
		{&api.Request{RequestId: 1}, false},
	}
	for _, c := range cases {
		b, err := proto.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := isQuick(b); got != c.want || wantQuick(c.req) != c.want {
			t.Errorf("isQuick(%v) = %v, want %v", c.req, got, c.want)
		}
	}
	if isQuick([]byte{0x82}) {
		t.Error("isQuick of a truncated tag is true")
	}
}
