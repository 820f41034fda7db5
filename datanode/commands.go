package datanode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/time/rate"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/store"
)

// The DataNode's commands (package datanode/command is their client):
// member requests on the HTTP port, each verified with the cluster key
// before its body is looked at further.

var (
	errStale      = command.ErrStaleRecovery
	errBadRequest = errors.New("bad request")
)

// commands registers the command handlers on mux.
func (d *DataNode) commands(mux *http.ServeMux) {
	mux.HandleFunc("POST "+command.PathInitRecovery, d.member("init recovery", d.initRecovery))
	mux.HandleFunc("POST "+command.PathFinishRecovery, d.member("finish recovery", d.finishRecovery))
	mux.HandleFunc("POST "+command.PathDelete, d.member("delete", d.deleteReplicas))
	mux.HandleFunc("POST "+command.PathReplicate, d.member("replicate", d.replicate))
}

// member wraps a command: the body (bounded), the signature, the answer
// (JSON) and the error's code.
func (d *DataNode) member(name string, h func(ctx context.Context, body []byte) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, command.MaxBody))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, command.ErrorBody{Code: command.CodeBadRequest, Error: fmt.Sprintf("%s: body: %v", name, err)})
			return
		}
		if err := d.key.Verify(r, body); err != nil {
			d.m.commandsRefused.Inc()
			d.log.Warn("DataNode command refused", "command", name, "remote", r.RemoteAddr, "err", err)
			writeJSON(w, http.StatusForbidden, command.ErrorBody{Code: command.CodeRefused, Error: fmt.Sprintf("%s: %v", name, err)})
			return
		}
		out, err := h(r.Context(), body)
		if err != nil {
			code, status := command.CodeFailed, http.StatusInternalServerError
			switch {
			case errors.Is(err, blocks.ErrNotFound):
				code, status = command.CodeNotFound, http.StatusNotFound
			case errors.Is(err, errStale):
				code, status = command.CodeStaleRecovery, http.StatusConflict
			case errors.Is(err, errBadRequest):
				code, status = command.CodeBadRequest, http.StatusBadRequest
			}
			d.log.Info("DataNode command failed", "command", name, "err", err)
			writeJSON(w, status, command.ErrorBody{Code: code, Error: fmt.Sprintf("%s: %v", name, err)})
			return
		}
		d.m.commands.Inc()
		if out == nil {
			out = struct{}{}
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}

// startRecovery records recoveryID as block's recovery, unless a larger
// one has started (errStale).
func (d *DataNode) startRecovery(b blocks.ID, recoveryID uint64) error {
	if recoveryID <= b.GenStamp {
		return fmt.Errorf("%w: recovery id %d of %v is not above its generation stamp", errBadRequest, recoveryID, b)
	}
	d.recMu.Lock()
	defer d.recMu.Unlock()
	if cur := d.recoveries[b.Block]; cur > recoveryID {
		return fmt.Errorf("%w: %v: recovery %d asked, %d started", errStale, b, recoveryID, cur)
	}
	d.recoveries[b.Block] = recoveryID
	return nil
}

func (d *DataNode) endRecovery(block, recoveryID uint64) {
	d.recMu.Lock()
	if d.recoveries[block] == recoveryID {
		delete(d.recoveries, block)
	}
	d.recMu.Unlock()
}

func (d *DataNode) stopWrite(block uint64) {
	if ws, ok := d.data.(WriteStopper); ok {
		ws.StopWrite(block)
	}
}

// initRecovery is HDFS's initReplicaRecovery: stop the block's writer and
// answer the replica's stamp, length and state.
func (d *DataNode) initRecovery(ctx context.Context, body []byte) (any, error) {
	var req command.RecoveryRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	b := req.Block.BlockID()
	if err := d.startRecovery(b, req.RecoveryID); err != nil {
		return nil, err
	}
	d.stopWrite(b.Block)
	r, err := d.blocks.Stat(ctx, b)
	if err != nil {
		return nil, err
	}
	st := store.ReplicaFinalized
	switch {
	case d.ch.isCorrupt(b):
		st = store.ReplicaCorrupt
	case r.State == blocks.BeingWritten:
		st = store.ReplicaBeingWritten
	}
	d.log.Info("block recovery started", "block", b, "recovery", req.RecoveryID, "length", r.Length, "state", st)
	return command.ReplicaInfo{GenStamp: r.ID.GenStamp, Length: r.Length, State: st}, nil
}

// finishRecovery is HDFS's updateReplicaUnderRecovery: cut the replica to
// the length the NameNode chose and finalize it under the recovery id.
func (d *DataNode) finishRecovery(ctx context.Context, body []byte) (any, error) {
	var req command.RecoveryRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	b := req.Block.BlockID()
	if req.NewLength < 0 {
		return nil, fmt.Errorf("%w: length %d", errBadRequest, req.NewLength)
	}
	if err := d.startRecovery(b, req.RecoveryID); err != nil {
		return nil, err
	}
	d.stopWrite(b.Block)
	err := d.blocks.RecoverTo(ctx, b, req.RecoveryID, req.NewLength)
	if errors.Is(err, blocks.ErrNotFound) {
		// Done already (a retry): the replica is finalized under the
		// recovery id at the length asked.
		if r, serr := d.blocks.Stat(ctx, blocks.ID{Block: b.Block, GenStamp: req.RecoveryID}); serr == nil &&
			r.State == blocks.Finalized && r.Length == req.NewLength {
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	d.endRecovery(b.Block, req.RecoveryID)
	d.log.Info("block recovered", "block", b, "genstamp", req.RecoveryID, "length", req.NewLength)
	return nil, nil
}

// deleteReplicas deletes the listed replicas (HDFS's DNA_INVALIDATE).
func (d *DataNode) deleteReplicas(ctx context.Context, body []byte) (any, error) {
	var req command.DeleteRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	var errs []error
	for _, b := range req.Blocks {
		if err := d.blocks.Delete(ctx, b.BlockID()); err != nil {
			errs = append(errs, err)
			continue
		}
		d.recMu.Lock()
		delete(d.recoveries, b.ID)
		d.recMu.Unlock()
	}
	if len(req.Blocks) > 0 {
		d.log.Info("replicas deleted", "count", len(req.Blocks)-len(errs), "failed", len(errs))
	}
	return nil, errors.Join(errs...)
}

// replicate sends a replica to targets (HDFS's DNA_TRANSFER), within the
// DataNode's bandwidth for background transfers.
func (d *DataNode) replicate(ctx context.Context, body []byte) (any, error) {
	var req command.ReplicateRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Targets) == 0 {
		return nil, fmt.Errorf("%w: no targets", errBadRequest)
	}
	b := req.Block.BlockID()
	if _, err := d.blocks.Stat(ctx, b); err != nil {
		return nil, err
	}
	targets := make([]dataxfer.Target, len(req.Targets))
	for i, t := range req.Targets {
		targets[i] = dataxfer.Target{Addr: t.Addr, UUID: t.UUID, Hostname: t.Hostname, StorageID: t.StorageID}
	}
	done := d.transferStarted()
	defer done()
	tok := d.tokens.IssueFor("", d.cluster.BlockPoolID, b.Block, tokenLifetime, blocktoken.Write)
	blk := dataxfer.Block{Pool: d.cluster.BlockPoolID, ID: b.Block, GenStamp: b.GenStamp}
	err := dataxfer.SendReplica(ctx, &throttledStore{Store: d.blocks, bw: d.limiter}, blk, tok, "", targets,
		dataxfer.SendOptions{Timeout: d.cfg.Transfer.Timeout})
	if err != nil {
		return nil, err
	}
	d.log.Info("replica sent", "block", b, "targets", len(targets), "first", targets[0].Addr)
	return nil, nil
}

// bandwidth bounds the bytes per second of the DataNode's background
// transfers together; nil: unbounded.
type bandwidth struct {
	lim   *rate.Limiter
	burst int
}

func newBandwidth(bps int64) *bandwidth {
	if bps <= 0 {
		return nil
	}
	burst := int(min(bps, 64<<10))
	return &bandwidth{lim: rate.NewLimiter(rate.Limit(bps), burst), burst: burst}
}

// wait blocks until n more bytes may go.
func (b *bandwidth) wait(ctx context.Context, n int) error {
	if b == nil {
		return nil
	}
	for n > 0 {
		k := min(n, b.burst)
		if err := b.lim.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// throttledStore reads replicas within a bandwidth.
type throttledStore struct {
	blocks.Store
	bw *bandwidth
}

func (s *throttledStore) Read(ctx context.Context, id blocks.ID, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Read(ctx, id, offset, length)
	if err != nil || s.bw == nil {
		return rc, err
	}
	return &throttledReader{ReadCloser: rc, ctx: ctx, bw: s.bw}, nil
}

type throttledReader struct {
	io.ReadCloser
	ctx context.Context
	bw  *bandwidth
}

func (r *throttledReader) Read(p []byte) (int, error) {
	if len(p) > r.bw.burst {
		p = p[:r.bw.burst]
	}
	if err := r.bw.wait(r.ctx, len(p)); err != nil {
		return 0, err
	}
	return r.ReadCloser.Read(p)
}
