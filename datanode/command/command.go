// Package command is the client of a DataNode's commands: the calls a
// NameNode makes on a DataNode's HTTP port to recover a block (HDFS's
// initReplicaRecovery and updateReplicaUnderRecovery), delete replicas
// and copy a replica to other DataNodes. Each is a member request
// (internal/clusterauth): a JSON body POSTed to a path under /datanode/v1/
// and signed with the cluster secret; a DataNode refuses a request without
// a valid signature (403).
//
// A command about a replica the DataNode does not have fails with an error
// wrapping blocks.ErrNotFound; a recovery older than one the DataNode has
// already started fails with ErrStaleRecovery.
package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/store"
)

// The commands' paths on a DataNode's HTTP port.
const (
	PathInitRecovery   = "/datanode/v1/recovery/init"
	PathFinishRecovery = "/datanode/v1/recovery/finish"
	PathDelete         = "/datanode/v1/delete"
	PathReplicate      = "/datanode/v1/replicate"
)

// MaxBody bounds a command's request body (a delete of a few tens of
// thousands of replicas).
const MaxBody = 4 << 20

// Error codes a DataNode answers with, in ErrorBody.Code.
const (
	CodeNotFound       = "not_found"
	CodeStaleRecovery  = "stale_recovery"
	CodeBadRequest     = "bad_request"
	CodeRefused        = "refused"
	CodeFailed         = "failed"
	CodeReplicateFails = "replicate_failed"
)

// ErrStaleRecovery: the DataNode has started a recovery of the block with
// a larger recovery id than the one asked (HDFS refuses the older one).
var ErrStaleRecovery = errors.New("datanode command: a newer recovery of the block has started")

// ErrRefused: the DataNode refused the request's signature.
var ErrRefused = errors.New("datanode command: refused (not a member's request)")

// Block names a replica on the wire.
type Block struct {
	ID       uint64 `json:"id"`
	GenStamp uint64 `json:"genStamp"`
}

// BlockOf and Block.ID convert between the wire form and blocks.ID.
func BlockOf(id blocks.ID) Block { return Block{ID: id.Block, GenStamp: id.GenStamp} }

// BlockID is the replica's name.
func (b Block) BlockID() blocks.ID { return blocks.ID{Block: b.ID, GenStamp: b.GenStamp} }

// RecoveryRequest is the body of PathInitRecovery and PathFinishRecovery.
type RecoveryRequest struct {
	Block      Block  `json:"block"`
	RecoveryID uint64 `json:"recoveryId"`
	NewLength  int64  `json:"newLength,omitempty"` // finish only
}

// ReplicaInfo is what InitRecovery answers: the replica's generation
// stamp, its length (the bytes it holds, all synced) and its state
// (finalized, being written, or corrupt if a read found it so).
type ReplicaInfo struct {
	GenStamp uint64             `json:"genStamp"`
	Length   int64              `json:"length"`
	State    store.ReplicaState `json:"state"`
}

// DeleteRequest is the body of PathDelete.
type DeleteRequest struct {
	Blocks []Block `json:"blocks"`
}

// Target is a DataNode a replica is sent to.
type Target struct {
	Addr      string `json:"addr"`
	UUID      string `json:"uuid"`
	Hostname  string `json:"hostname,omitempty"`
	StorageID string `json:"storageId,omitempty"`
}

// ReplicateRequest is the body of PathReplicate.
type ReplicateRequest struct {
	Block   Block    `json:"block"`
	Targets []Target `json:"targets"`
}

// ErrorBody is a refused command's answer.
type ErrorBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// Client calls DataNodes' commands. Key signs the requests (required);
// HTTP is the client used (nil: http.DefaultClient).
type Client struct {
	Key  *clusterauth.Key
	HTTP *http.Client
}

// InitRecovery is the first step of a block recovery on one DataNode: it
// stops any writer of the replica b and answers its stamp, length and
// state. recoveryID is the generation stamp the recovery finalizes under;
// a recovery with a smaller id than one already started is refused
// (ErrStaleRecovery).
func (c *Client) InitRecovery(ctx context.Context, httpAddr string, b blocks.ID, recoveryID uint64) (ReplicaInfo, error) {
	var out ReplicaInfo
	err := c.call(ctx, httpAddr, PathInitRecovery, RecoveryRequest{Block: BlockOf(b), RecoveryID: recoveryID}, &out)
	return out, err
}

// FinishRecovery is the second step: the replica b is cut to newLength and
// finalized under recoveryID. Calling it again after it succeeded
// succeeds.
func (c *Client) FinishRecovery(ctx context.Context, httpAddr string, b blocks.ID, recoveryID uint64, newLength int64) error {
	return c.call(ctx, httpAddr, PathFinishRecovery, RecoveryRequest{Block: BlockOf(b), RecoveryID: recoveryID, NewLength: newLength}, nil)
}

// Delete deletes the replicas ids (HDFS's DNA_INVALIDATE). A replica the
// DataNode does not have (or has under another stamp) is not an error: a
// delete may be repeated.
func (c *Client) Delete(ctx context.Context, httpAddr string, ids []blocks.ID) error {
	req := DeleteRequest{Blocks: make([]Block, len(ids))}
	for i, id := range ids {
		req.Blocks[i] = BlockOf(id)
	}
	return c.call(ctx, httpAddr, PathDelete, req, nil)
}

// Replicate has the DataNode send its replica b to targets, a pipeline
// (HDFS's DNA_TRANSFER), and returns once the targets have it or the copy
// failed. The DataNode bounds the bytes per second of its copies.
func (c *Client) Replicate(ctx context.Context, httpAddr string, b blocks.ID, targets []dataxfer.Target) error {
	req := ReplicateRequest{Block: BlockOf(b)}
	for _, t := range targets {
		req.Targets = append(req.Targets, Target{Addr: t.Addr, UUID: t.UUID, Hostname: t.Hostname, StorageID: t.StorageID})
	}
	return c.call(ctx, httpAddr, PathReplicate, req, nil)
}

// call POSTs a signed command and decodes its answer into out (if not
// nil).
func (c *Client) call(ctx context.Context, httpAddr, path string, in, out any) error {
	if c.Key == nil {
		return fmt.Errorf("datanode command %s %s: no cluster key", path, httpAddr)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("datanode command %s %s: %w", path, httpAddr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	c.Key.Sign(req, body)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("datanode command %s %s: %w", path, httpAddr, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return fmt.Errorf("datanode command %s %s: read answer: %w", path, httpAddr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(rb, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, rb)
		}
		var kind error
		switch {
		case eb.Code == CodeNotFound:
			kind = blocks.ErrNotFound
		case eb.Code == CodeStaleRecovery:
			kind = ErrStaleRecovery
		case resp.StatusCode == http.StatusForbidden:
			kind = ErrRefused
		}
		if kind != nil {
			return fmt.Errorf("datanode command %s %s: %w: %s", path, httpAddr, kind, eb.Error)
		}
		return fmt.Errorf("datanode command %s %s: %s", path, httpAddr, eb.Error)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			return fmt.Errorf("datanode command %s %s: decode answer: %w", path, httpAddr, err)
		}
	}
	return nil
}
