// Package blocktoken issues and verifies HDFS block access tokens.
//
// A token is what an HDFS client passes to a DataNode with each op: an
// identifier (HDFS's BlockTokenIdentifier in its Writable encoding: expiry,
// key id, user, block pool, block id, access modes, storage types, storage
// ids) and a password, the HMAC-SHA1 of the identifier under a block key,
// as Hadoop's SecretManager computes it. NameNodes issue tokens; DataNodes
// verify them. Both derive the block key with id k from the cluster's
// 32-byte secret (HMAC-SHA256 of a fixed label and k), so no key has to be
// distributed: rotating keys is issuing under a new key id, and a key id
// alone gives nothing to whoever does not hold the secret.
package blocktoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Kind is the token kind HDFS gives block tokens.
const Kind = "HDFS_BLOCK_TOKEN"

// AccessMode is what a token allows on its block (HDFS's
// BlockTokenIdentifier.AccessMode).
type AccessMode uint8

const (
	Read AccessMode = iota
	Write
	Copy
	Replace
)

var modeNames = [...]string{"READ", "WRITE", "COPY", "REPLACE"}

func (m AccessMode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Errors of Verify; each is wrapped with the block and the reason.
var (
	ErrMissing   = errors.New("blocktoken: no block token")
	ErrMalformed = errors.New("blocktoken: malformed token")
	ErrForged    = errors.New("blocktoken: token password does not match")
	ErrExpired   = errors.New("blocktoken: token expired")
	ErrWrongBlk  = errors.New("blocktoken: token is for another block")
	ErrWrongMode = errors.New("blocktoken: token does not allow the access")
)

// Identifier is a BlockTokenIdentifier.
type Identifier struct {
	Expiry       time.Time // expiryDate, in milliseconds since the epoch on the wire
	KeyID        int32
	UserID       string
	BlockPoolID  string
	BlockID      uint64
	Modes        []AccessMode
	StorageTypes []string // "DISK", "SSD", ...
	StorageIDs   []string
	Handshake    []byte
}

// Token is an issued token: the encoded identifier and its password, with
// Hadoop's kind; Service is empty for block tokens.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// Marshal encodes the identifier as BlockTokenIdentifier.writeLegacy does.
func (id *Identifier) Marshal() []byte {
	var b []byte
	b = appendVLong(b, id.Expiry.UnixMilli())
	b = appendVLong(b, int64(id.KeyID))
	b = appendWString(b, id.UserID)
	b = appendWString(b, id.BlockPoolID)
	b = appendVLong(b, int64(id.BlockID))
	b = appendVLong(b, int64(len(id.Modes)))
	for _, m := range id.Modes {
		b = appendText(b, m.String())
	}
	b = appendVLong(b, int64(len(id.StorageTypes)))
	for _, t := range id.StorageTypes {
		b = appendText(b, t)
	}
	b = appendVLong(b, int64(len(id.StorageIDs)))
	for _, s := range id.StorageIDs {
		b = appendWString(b, s)
	}
	if len(id.Handshake) > 0 {
		b = appendVLong(b, int64(len(id.Handshake)))
		b = append(b, id.Handshake...)
	}
	return b
}

// maxString bounds any string or list in an identifier: a token is a few
// hundred bytes.
const maxString = 4096

// Unmarshal decodes a Writable-encoded identifier (readFieldsLegacy). As in
// Hadoop, the storage types, ids and handshake may be absent at the end.
func Unmarshal(b []byte) (*Identifier, error) {
	r := bytes.NewReader(b)
	id := &Identifier{}
	fail := func(what string, err error) (*Identifier, error) {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	exp, err := readVLong(r)
	if err != nil {
		return fail("expiry", err)
	}
	id.Expiry = time.UnixMilli(exp)
	k, err := readVLong(r)
	if err != nil || k != int64(int32(k)) {
		return fail("key id", errOr(err, "out of range"))
	}
	id.KeyID = int32(k)
	if id.UserID, err = readWString(r); err != nil {
		return fail("user", err)
	}
	if id.BlockPoolID, err = readWString(r); err != nil {
		return fail("block pool", err)
	}
	blk, err := readVLong(r)
	if err != nil {
		return fail("block id", err)
	}
	id.BlockID = uint64(blk)
	n, err := readVLong(r)
	if err != nil || n < 0 || n > int64(len(modeNames)) {
		return fail("modes", errOr(err, "count out of range"))
	}
	for range n {
		s, err := readText(r)
		if err != nil {
			return fail("mode", err)
		}
		m := -1
		for i, name := range modeNames {
			if s == name {
				m = i
			}
		}
		if m < 0 {
			return fail("mode", fmt.Errorf("unknown %q", s))
		}
		id.Modes = append(id.Modes, AccessMode(m))
	}
	if r.Len() == 0 {
		return id, nil
	}
	if id.StorageTypes, err = readList(r, readText); err != nil {
		return fail("storage types", err)
	}
	if r.Len() == 0 {
		return id, nil
	}
	if id.StorageIDs, err = readList(r, readWString); err != nil {
		return fail("storage ids", err)
	}
	if r.Len() == 0 {
		return id, nil
	}
	hn, err := readVLong(r)
	if err != nil || hn < 0 || hn > int64(r.Len()) {
		return fail("handshake", errOr(err, "length out of range"))
	}
	if hn > 0 {
		id.Handshake = make([]byte, hn)
		io.ReadFull(r, id.Handshake)
	}
	if r.Len() != 0 {
		return fail("identifier", fmt.Errorf("%d trailing bytes", r.Len()))
	}
	return id, nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

func readList(r *bytes.Reader, read func(*bytes.Reader) (string, error)) ([]string, error) {
	n, err := readVLong(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(r.Len()) {
		return nil, fmt.Errorf("count %d out of range", n)
	}
	var out []string
	for range n {
		s, err := read(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// appendVLong is Hadoop's WritableUtils.writeVLong.
func appendVLong(b []byte, i int64) []byte {
	if i >= -112 && i <= 127 {
		return append(b, byte(i))
	}
	l := -112
	if i < 0 {
		i ^= -1
		l = -120
	}
	for t := i; t != 0; t >>= 8 {
		l--
	}
	b = append(b, byte(int8(l)))
	if l < -120 {
		l = -(l + 120)
	} else {
		l = -(l + 112)
	}
	for idx := l; idx != 0; idx-- {
		b = append(b, byte(i>>((idx-1)*8)))
	}
	return b
}

// readVLong is Hadoop's WritableUtils.readVLong.
func readVLong(r *bytes.Reader) (int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, io.ErrUnexpectedEOF
	}
	first := int8(c)
	if first >= -112 {
		return int64(first), nil
	}
	n := -111 - int(first)
	neg := first < -120
	if neg {
		n = -119 - int(first)
	}
	var i int64
	for range n - 1 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		i = i<<8 | int64(c)
	}
	if neg {
		i ^= -1
	}
	return i, nil
}

// appendWString is WritableUtils.writeString: a 4-byte length and UTF-8.
func appendWString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func readWString(r *bytes.Reader) (string, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", io.ErrUnexpectedEOF
	}
	n := int32(binary.BigEndian.Uint32(l[:]))
	if n == -1 {
		return "", nil
	}
	return readN(r, int64(n))
}

// appendText is Text.writeString (what writeEnum uses): a vint length and
// UTF-8.
func appendText(b []byte, s string) []byte {
	return append(appendVLong(b, int64(len(s))), s...)
}

func readText(r *bytes.Reader) (string, error) {
	n, err := readVLong(r)
	if err != nil {
		return "", err
	}
	return readN(r, n)
}

func readN(r *bytes.Reader, n int64) (string, error) {
	if n < 0 || n > maxString || n > int64(r.Len()) {
		return "", fmt.Errorf("string length %d out of range", n)
	}
	b := make([]byte, n)
	io.ReadFull(r, b)
	return string(b), nil
}

// Manager issues and verifies tokens under keys derived from a cluster
// secret. It is safe for concurrent use.
type Manager struct {
	secret [32]byte
	keyID  int32
	now    func() time.Time
}

// NewManager returns a Manager that issues under key id keyID. now is the
// clock (nil: time.Now).
func NewManager(secret [32]byte, keyID int32, now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	return &Manager{secret: secret, keyID: keyID, now: now}
}

// blockKey derives block key k from the secret.
func (m *Manager) blockKey(k int32) []byte {
	h := hmac.New(sha256.New, m.secret[:])
	h.Write([]byte("nimbus hdfs block token key\x00"))
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(k)))
	return h.Sum(nil)
}

func (m *Manager) password(k int32, ident []byte) []byte {
	h := hmac.New(sha1.New, m.blockKey(k))
	h.Write(ident)
	return h.Sum(nil)
}

// Issue makes a token for id, filling its KeyID with the Manager's.
func (m *Manager) Issue(id Identifier) Token {
	id.KeyID = m.keyID
	b := id.Marshal()
	return Token{Identifier: b, Password: m.password(m.keyID, b), Kind: Kind}
}

// IssueFor makes a token for one block valid for lifetime from now.
func (m *Manager) IssueFor(user, pool string, block uint64, lifetime time.Duration, modes ...AccessMode) Token {
	return m.Issue(Identifier{Expiry: m.now().Add(lifetime), UserID: user, BlockPoolID: pool, BlockID: block, Modes: modes})
}

// Verify checks that tok is a token this cluster issued, not expired, for
// block (pool, block) and allowing mode (HDFS's
// BlockTokenSecretManager.checkAccess). A token without identifier is
// ErrMissing.
func (m *Manager) Verify(tok Token, pool string, block uint64, mode AccessMode) error {
	if len(tok.Identifier) == 0 {
		return fmt.Errorf("%w for blk_%d (%s access)", ErrMissing, block, mode)
	}
	id, err := Unmarshal(tok.Identifier)
	if err != nil {
		return fmt.Errorf("blk_%d: %w", block, err)
	}
	if !hmac.Equal(m.password(id.KeyID, tok.Identifier), tok.Password) {
		return fmt.Errorf("%w (blk_%d, key %d)", ErrForged, block, id.KeyID)
	}
	if !m.now().Before(id.Expiry) {
		return fmt.Errorf("%w at %s (blk_%d)", ErrExpired, id.Expiry.UTC().Format(time.RFC3339), block)
	}
	if id.BlockID != block || id.BlockPoolID != pool {
		return fmt.Errorf("%w: token for blk_%d in pool %q, asked blk_%d in pool %q", ErrWrongBlk, id.BlockID, id.BlockPoolID, block, pool)
	}
	for _, am := range id.Modes {
		if am == mode {
			return nil
		}
	}
	return fmt.Errorf("%w: blk_%d, %s not in %v", ErrWrongMode, block, mode, id.Modes)
}
