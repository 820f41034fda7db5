package store

import (
	"encoding/binary"
	"fmt"
)

// Renewal rows: 'h' holder -> the Unix ms of the holder's last lease renewal
// that reached the store (8 bytes, big-endian). Only engines on a shared
// store write them (namespace/lease.go): a client renews through one
// NameNode, and another that judges its lease (a takeover after the soft
// limit, recovery after the hard limit) must see the renewal. A lone
// engine keeps renewals in memory, as HDFS's NameNode does.

// HolderKey is the key of lease holder h's renewal row.
func HolderKey(h string) []byte {
	k := make([]byte, 1, 1+len(h))
	k[0] = tableHolder
	return append(k, h...)
}

// DecodeHolderKey returns the holder of a renewal key.
func DecodeHolderKey(k []byte) (string, bool) {
	if len(k) < 1 || k[0] != tableHolder {
		return "", false
	}
	return string(k[1:]), true
}

// AllHoldersRange covers the renewal table.
func AllHoldersRange() (start, end []byte) {
	return []byte{tableHolder}, []byte{tableHolder + 1}
}

// EncodeRenewal is the value of a renewal row at Unix ms.
func EncodeRenewal(ms int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ms)) }

// DecodeRenewal decodes a renewal row's value.
func DecodeRenewal(key, v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s: renewal of %d bytes", ErrCorrupt, FormatKey(key), len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
