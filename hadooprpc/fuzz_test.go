package hadooprpc

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	h "github.com/nimbus-fs/nimbus/api/hadoop"
)

func FuzzConnHeader(f *testing.F) {
	f.Add([]byte("hrpc\x09\x00\x00"))
	f.Add([]byte("hrpc\x09\x00\xdf"))
	f.Add([]byte("hrpc\x08\x00\x00"))
	f.Add([]byte("GET / H"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hd, err := ParseConnHeader(b)
		if err == nil && (len(b) != headerLen || string(b[:4]) != "hrpc" || hd.Version != ipcVersion) {
			t.Fatalf("accepted %q", b)
		}
	})
}

func FuzzFrame(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x03abc"), 16)
	f.Add([]byte("\x7f\xff\xff\xff"), 16)
	f.Add([]byte("\xff\xff\xff\xff"), 1<<20)
	f.Add([]byte("\x00\x00\x00\x05ab"), 16)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		fr, err := readFrame(bytes.NewReader(b), max)
		if err == nil && (len(fr) > max || !bytes.Equal(fr, b[4:4+len(fr)])) {
			t.Fatalf("frame of %d bytes from %d, bound %d", len(fr), len(b), max)
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	tc := &testClient{id: []byte("0123456789abcdef")}
	f.Add(frame(tc.header(0), &h.RequestHeaderProto{MethodName: proto.String("getFileInfo"), DeclaringClassProtocolName: proto.String(Protocol), ClientProtocolVersion: proto.Uint64(1)},
		&h.GetFileInfoRequestProto{Src: proto.String("/a")})[4:])
	f.Add(frame(tc.header(-3), &h.IpcConnectionContextProto{UserInfo: &h.UserInformationProto{EffectiveUser: proto.String("u")}})[4:])
	f.Add(frame(tc.header(-4))[4:])
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		if r.Header == nil || r.Header.CallId == nil || (r.Header.GetCallId() >= 0 && r.Method == nil) {
			t.Fatalf("decoded %v without its parts", r)
		}
		if len(r.Body) > len(b) {
			t.Fatalf("body of %d bytes from %d", len(r.Body), len(b))
		}
	})
}
