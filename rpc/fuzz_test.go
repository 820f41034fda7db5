package rpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/nimbus-fs/nimbus/api"
	"google.golang.org/protobuf/proto"
)

// FuzzDecode feeds arbitrary bytes to the frame reader and the envelope
// decoder as the server's reader loop does: nothing may panic, a decoded
// request must re-encode and decode to the same message, and peekRequestID
// must agree with the full decode.
func FuzzDecode(f *testing.F) {
	seed := func(m proto.Message) []byte { b, _ := AppendFrame(nil, m, 0); return b }
	f.Add(seed(&api.Request{RequestId: 7, User: "u", Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/a"}}}))
	f.Add(seed(&api.Request{RequestId: 1 << 50, Body: &api.Request_Concat{Concat: &api.ConcatRequest{Target: "/t", Srcs: []string{"/a", "/b"}}}}))
	f.Add(seed(&api.Response{RequestId: 3, Error: &api.Error{Kind: 1, Op: "stat", Path: "/x"}}))
	f.Add(seed(&api.Response{RequestId: 4, Result: &api.Response_Listing{Listing: &api.Listing{Remaining: 2, Entries: []*api.FileStatus{
		{Path: "a", Owner: "o", Group: "g"}, {Path: "b", Owner: "o", Group: "h", Symlink: "/t"}, {Path: "/abs/c", Owner: "p"}, {Path: ""}}}}}))
	f.Add(binary.AppendUvarint(nil, 1<<62))
	f.Add([]byte{0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		for {
			frame, err := ReadFrame(br, nil, 1<<16)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("unexpected error class: %v", err)
				}
				return
			}
			checkResponseView(t, frame)
			req := &api.Request{}
			if proto.Unmarshal(frame, req) != nil {
				continue
			}
			if id, ok := peekRequestID(frame); !ok || id != req.GetRequestId() {
				// protobuf keeps the last of repeated scalar fields; peek
				// takes the first. Only compare when field 1 occurs once.
				if countField1(frame) <= 1 {
					t.Fatalf("peekRequestID = %d,%v; decode says %d", id, ok, req.GetRequestId())
				}
			}
			MethodOf(req)
			again, err := AppendFrame(nil, req, 0)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ReadFrame(bufio.NewReader(bytes.NewReader(again)), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			req2 := &api.Request{}
			if err := proto.Unmarshal(back, req2); err != nil || !proto.Equal(req, req2) {
				t.Fatalf("round trip changed the request: %v", err)
			}
			isQuick(frame) // must not panic on anything
			if got, want := isQuick(back), wantQuick(req); got != want {
				m, _ := MethodOf(req)
				t.Fatalf("isQuick = %v for a %s request, want %v", got, m, want)
			}
		}
	})
}

// checkResponseView decodes frame as a response both ways the client does:
// in place (Conn.CallView) and by copy (Conn.Call, which also uses vtproto's
// decoder). They must agree, and a listing converted from the in-place
// decode must not change when the frame is overwritten afterwards, as a
// reused frame buffer is.
func checkResponseView(t *testing.T, frame []byte) {
	safe := &api.Response{}
	serr := unmarshal(frame, safe)
	buf := bytes.Clone(frame)
	view := &api.Response{Result: &api.Response_Listing{Listing: api.ListingFromVTPool()}} // as client.List
	verr := view.UnmarshalVTUnsafe(buf)
	if (serr == nil) != (verr == nil) {
		t.Fatalf("UnmarshalVTUnsafe error %v, UnmarshalVT error %v", verr, serr)
	}
	if serr != nil || safe.GetListing() == nil {
		return
	}
	if !proto.Equal(safe.GetListing(), view.GetListing()) {
		t.Fatalf("listing decoded in place differs:\n%v\n%v", view.GetListing(), safe.GetListing())
	}
	got := ListingFromProto("/dir", view.GetListing())
	for i := range buf {
		buf[i] = 'X'
	}
	want := ListingFromProto("/dir", safe.GetListing())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listing converted from an in-place decode changed with its frame:\n%+v\n%+v", got, want)
	}
}

func countField1(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, k := consumeTag(b)
		if k < 0 {
			return n
		}
		b = b[k:]
		if num == 1 {
			n++
		}
		k = consumeValue(num, typ, b)
		if k < 0 {
			return n
		}
		b = b[k:]
	}
	return n
}

// wantQuick is isQuick's rule applied to a decoded request.
func wantQuick(req *api.Request) bool {
	switch m, _ := MethodOf(req); m {
	case MethodStat, MethodList, MethodDefaults, MethodEcho:
		return true
	case MethodRead:
		n := req.GetRead().GetLength()
		return n > 0 && n <= quickReadLimit
	}
	return false
}

// FuzzHello feeds arbitrary bytes to the connect-back hello decoder: no
// panic, and a hello that decodes encodes back to the same line.
func FuzzHello(f *testing.F) {
	f.Add([]byte("NIMBUS-HELLO 1 0123abcd 7 http://127.0.0.1:9870\n"))
	f.Add([]byte("NIMBUS-HELLO 2 t i u\n"))
	f.Add([]byte("NIMBUS-HELLO 1 t i u extra\n"))
	f.Add([]byte("NIMBUS-HELLO 1  i u\n"))
	f.Add([]byte("NIMBUS-HELLO 1 t\x00 i u"))
	f.Add(bytes.Repeat([]byte("x"), 2000))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHello(bufio.NewReaderSize(bytes.NewReader(data), 16))
		if err != nil {
			if _, err2 := ParseHello(data); err2 == nil && bytes.Count(data, []byte("\n")) == 1 && data[len(data)-1] == '\n' {
				t.Fatalf("ReadHello failed (%v) on a line ParseHello takes", err)
			}
			return
		}
		line, err := AppendHello(nil, h)
		if err != nil {
			t.Fatalf("a decoded hello %+v does not encode: %v", h, err)
		}
		back, err := ParseHello(line)
		if err != nil || back != h {
			t.Fatalf("round trip: %+v %v, want %+v", back, err, h)
		}
		if !bytes.HasPrefix(data, line) {
			t.Fatalf("decoded %+v from %q, which does not start with its encoding %q", h, data, line)
		}
	})
}
