package registry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// Cluster is a cluster's identity, made once with its store and kept in
// the store's metadata: every NameNode and DataNode of the store reads
// the same one, and a DataNode's storage directory records it, so that a
// directory of another cluster is refused.
type Cluster struct {
	// ID is HDFS's clusterID: "CID-" and a random UUID.
	ID string
	// BlockPoolID is HDFS's block pool id, "BP-<random>-<host>-<Unix ms>":
	// the one block pool of the cluster's namespace.
	BlockPoolID string
}

// The identity's rows, in the store-wide metadata table, next to the
// cluster secret (internal/clusterauth):
//
//	'm' "cluster/id"        -> the cluster id
//	'm' "cluster/blockpool" -> the block pool id
//
// Written once, together, by the first process that finds them missing,
// and never changed.
var (
	clusterIDKey = store.MetaKey("cluster/id")
	blockPoolKey = store.MetaKey("cluster/blockpool")
)

// LoadCluster returns st's cluster identity, making and recording it if st
// has none. Processes that start together agree: one records it, the
// others read what it recorded.
func LoadCluster(ctx context.Context, st store.Store) (Cluster, error) {
	c, ok, err := readCluster(ctx, st, store.ReadCommitted)
	if err != nil || ok {
		if err != nil {
			return Cluster{}, fmt.Errorf("registry: read the cluster identity: %w", err)
		}
		return c, nil
	}
	for attempt := 0; ; attempt++ {
		c, err := recordCluster(ctx, st)
		if err == nil {
			return c, nil
		}
		if attempt < 3 && store.IsRetryable(err) {
			continue // another process recorded it meanwhile: read it again
		}
		return Cluster{}, fmt.Errorf("registry: record the cluster identity: %w", err)
	}
}

func readCluster(ctx context.Context, st store.Store, mode store.Mode) (Cluster, bool, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return Cluster{}, false, err
	}
	defer txn.Rollback()
	return readClusterIn(ctx, txn, mode)
}

func readClusterIn(ctx context.Context, txn store.Txn, mode store.Mode) (Cluster, bool, error) {
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: blockPoolKey, Mode: mode}, {Key: clusterIDKey, Mode: mode}})
	if err != nil {
		return Cluster{}, false, err
	}
	switch {
	case vals[0] == nil && vals[1] == nil:
		return Cluster{}, false, nil
	case vals[0] == nil || vals[1] == nil:
		return Cluster{}, false, errors.New("the store has one of cluster/id and cluster/blockpool without the other")
	}
	c := Cluster{ID: string(vals[1]), BlockPoolID: string(vals[0])}
	if !strings.HasPrefix(c.ID, "CID-") || !strings.HasPrefix(c.BlockPoolID, "BP-") || len(c.ID) > 255 || len(c.BlockPoolID) > 255 {
		return Cluster{}, false, fmt.Errorf("malformed cluster identity %q, %q", c.ID, c.BlockPoolID)
	}
	return c, true, nil
}

func recordCluster(ctx context.Context, st store.Store) (Cluster, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return Cluster{}, err
	}
	defer txn.Rollback()
	c, ok, err := readClusterIn(ctx, txn, store.Exclusive)
	if err != nil || ok {
		return c, err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	c = Cluster{
		ID:          "CID-" + NewUUID(),
		BlockPoolID: fmt.Sprintf("BP-%d-%s-%d", uint32(r[0])<<24|uint32(r[1])<<16|uint32(r[2])<<8|uint32(r[3])>>1, host, time.Now().UnixMilli()),
	}
	insert(txn, blockPoolKey, []byte(c.BlockPoolID))
	insert(txn, clusterIDKey, []byte(c.ID))
	return c, txn.Commit(ctx)
}

// NewUUID returns a random (version 4) UUID in its usual spelling.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
