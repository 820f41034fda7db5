package loop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nimbus-fs/nimbus/coherence"
)

// The transport: each server's own HTTP listener takes peers' messages at
// POST /coherence (Path), a batch in the wire format (wire.go), answered
// 204 once handed to the loop. Sending is best effort: one POST per peer
// and Ready batch, in the background, bounded in number; a batch that
// cannot be sent, or finds the receiver's inbox full, is dropped, and the
// protocol re-sends what it needs answered (every message is idempotent).
// There is no authentication: the endpoint is for the servers of one
// cluster on a network they trust, as the RPC port is today.

// Path is where the Handler is mounted on every server.
const Path = "/coherence"

// maxBody bounds a received batch.
const maxBody = 4 << 20

// Handler receives peers' message batches.
func (l *Loop) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(b) > maxBody {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		ms, err := decodeBatch(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case l.inbox <- ms:
		default:
			l.m.dropped.Add(float64(len(ms)))
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// send posts ms, grouped by receiver, to the addresses the view gives.
func (l *Loop) send(ctx context.Context, ms []coherence.Message, v *view) {
	by := make(map[coherence.NodeID][]coherence.Message)
	var order []coherence.NodeID
	for _, m := range ms {
		l.m.sent.WithLabelValues(m.Type.String()).Inc()
		if _, ok := by[m.To]; !ok {
			order = append(order, m.To)
		}
		by[m.To] = append(by[m.To], m)
	}
	for _, to := range order {
		batch := by[to]
		mem, ok := v.members[string(to)]
		if !ok || mem.Addr == "" {
			l.m.dropped.Add(float64(len(batch)))
			continue
		}
		select {
		case l.sendSem <- struct{}{}:
		default:
			l.m.dropped.Add(float64(len(batch)))
			continue
		}
		url := strings.TrimSuffix(mem.Addr, "/") + Path
		body := appendBatch(nil, batch)
		go func() {
			defer func() { <-l.sendSem }()
			if err := l.post(ctx, url, body); err != nil {
				l.m.sendErrors.Inc()
				l.log.Debug("coherence: send", "to", to, "err", err)
			}
		}()
	}
}

func (l *Loop) post(ctx context.Context, url string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
