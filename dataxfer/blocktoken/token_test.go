package blocktoken

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

// TestVLongEncoding pins WritableUtils.writeVLong's encoding: one byte for
// [-112, 127], else a length byte and the big-endian magnitude (one's
// complement for negatives). 1733000000000 is 0x01937ed97200: six bytes,
// length byte -112-6 = 0x8a.
func TestVLongEncoding(t *testing.T) {
	cases := map[int64]string{
		0: "00", 127: "7f", -112: "90", 128: "8f80", 255: "8fff", 256: "8e0100",
		-113: "8770", -1: "ff", 1733000000000: "8a01937ed97200",
	}
	for v, want := range cases {
		got := hex.EncodeToString(appendVLong(nil, v))
		if got != want {
			t.Errorf("vlong %d = %s, want %s", v, got, want)
		}
		back, err := readVLong(bytes.NewReader(appendVLong(nil, v)))
		if err != nil || back != v {
			t.Errorf("vlong %d read back %d %v", v, back, err)
		}
	}
}

// TestIdentifierLayout checks the Writable layout field by field.
func TestIdentifierLayout(t *testing.T) {
	id := Identifier{Expiry: time.UnixMilli(1000), KeyID: 7, UserID: "u", BlockPoolID: "bp", BlockID: 42, Modes: []AccessMode{Read, Write}}
	got := hex.EncodeToString(id.Marshal())
	want := "" +
		"8e03e8" + // expiry 1000 ms
		"07" + // key id
		"00000001" + "75" + // user "u" (int length)
		"00000002" + "6270" + // pool "bp"
		"2a" + // block 42
		"02" + "04" + "52454144" + "05" + "5752495445" + // modes READ, WRITE (Text: vint length)
		"00" + "00" // no storage types, no storage ids; no handshake
	if got != want {
		t.Fatalf("identifier\n got %s\nwant %s", got, want)
	}
	back, err := Unmarshal(id.Marshal())
	if err != nil || back.BlockID != 42 || back.UserID != "u" || len(back.Modes) != 2 || !back.Expiry.Equal(id.Expiry) {
		t.Fatalf("unmarshal: %+v %v", back, err)
	}
}

func TestIssueVerify(t *testing.T) {
	var secret [32]byte
	copy(secret[:], "0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	nn := NewManager(secret, 3, clock)
	dn := NewManager(secret, 0, clock) // verifies any key id derived from the secret
	tok := nn.IssueFor("alice", "BP-1", 99, time.Hour, Read, Write)
	if tok.Kind != Kind || len(tok.Password) != 20 {
		t.Fatalf("token kind %q, password %d bytes", tok.Kind, len(tok.Password))
	}
	if err := dn.Verify(tok, "BP-1", 99, Write); err != nil {
		t.Fatal(err)
	}
	check := func(name string, tok Token, pool string, block uint64, mode AccessMode, want error) {
		t.Helper()
		if err := dn.Verify(tok, pool, block, mode); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	check("missing", Token{}, "BP-1", 99, Read, ErrMissing)
	forged := tok
	forged.Password = append([]byte(nil), tok.Password...)
	forged.Password[0] ^= 1
	check("forged password", forged, "BP-1", 99, Read, ErrForged)
	// A changed identifier (another block) with the old password.
	id, _ := Unmarshal(tok.Identifier)
	id.BlockID = 100
	check("changed identifier", Token{Identifier: id.Marshal(), Password: tok.Password}, "BP-1", 100, Read, ErrForged)
	other := NewManager([32]byte{1}, 3, clock).IssueFor("alice", "BP-1", 99, time.Hour, Read)
	check("other cluster", other, "BP-1", 99, Read, ErrForged)
	check("wrong block", tok, "BP-1", 98, Read, ErrWrongBlk)
	check("wrong pool", tok, "BP-2", 99, Read, ErrWrongBlk)
	check("wrong mode", tok, "BP-1", 99, Copy, ErrWrongMode)
	check("garbage", Token{Identifier: []byte{0x80}, Password: tok.Password}, "BP-1", 99, Read, ErrMalformed)
	now = now.Add(time.Hour)
	check("expired", tok, "BP-1", 99, Read, ErrExpired)
}

// FuzzIdentifier: the identifier decoder takes bytes from the network.
func FuzzIdentifier(f *testing.F) {
	id := Identifier{Expiry: time.UnixMilli(1733000000000), KeyID: 5, UserID: "hdfs", BlockPoolID: "BP-1", BlockID: 1 << 40,
		Modes: []AccessMode{Read, Write, Copy, Replace}, StorageTypes: []string{"DISK"}, StorageIDs: []string{"DS-1"}, Handshake: []byte{1, 2}}
	f.Add(id.Marshal())
	f.Add((&Identifier{}).Marshal())
	f.Add([]byte{0x88, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := Unmarshal(b)
		if err != nil {
			return
		}
		back, err := Unmarshal(id.Marshal())
		if err != nil || back.BlockID != id.BlockID || back.BlockPoolID != id.BlockPoolID || len(back.Modes) != len(id.Modes) {
			t.Fatalf("round trip of %+v: %+v %v", id, back, err)
		}
	})
}
