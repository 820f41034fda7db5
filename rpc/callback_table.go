package rpc

import (
	"container/list"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// callbackTable is what a server knows of the callback endpoints
// (callbackKey) invocations named: those it is dialling or connected to
// (live), and those that refused it or could not be reached recently
// (refused). It is a cache that forgets, so that no sequence of
// invocations can stop the server from connecting back to a good client:
//
//   - live entries are bounded (maxCallbacks): each is a connection and a
//     goroutine; one leaves when its dial fails or its connection ends;
//   - a refusal is remembered for refusedFor, so that an endpoint that
//     refused is not dialled on each of its client's invocations; past
//     maxRefused refusals the oldest is forgotten first, and an expired
//     one is forgotten when met. A flood of refusing endpoints therefore
//     costs each of them a dial, and pushes older refusals out, but never
//     fills the table.
//
// It is not safe for concurrent use: the server holds s.mu around it.
type callbackTable struct {
	live    map[string]struct{}
	refused map[string]*list.Element // of *refusal, in order
	order   list.List                // refusals, oldest first
}

// refusal is one remembered refusal.
type refusal struct {
	key   string
	until time.Time
}

// maxRefused bounds the refusals a server remembers.
const maxRefused = 4096

func newCallbackTable() *callbackTable {
	return &callbackTable{live: map[string]struct{}{}, refused: map[string]*list.Element{}}
}

// begin reports whether key should be dialled now: it is not live, not
// refused within refusedFor, and the live entries are under their bound.
// When it reports true, key is live until failed or ended.
func (t *callbackTable) begin(key string, now time.Time) bool {
	if _, ok := t.live[key]; ok {
		return false
	}
	if el, ok := t.refused[key]; ok {
		if now.Before(el.Value.(*refusal).until) {
			return false
		}
		t.forget(el)
	}
	if len(t.live) >= maxCallbacks {
		return false
	}
	t.live[key] = struct{}{}
	return true
}

// failed records that key's dial was refused or unreachable: it is not
// dialled again before now+refusedFor, unless it is forgotten first.
func (t *callbackTable) failed(key string, now time.Time) {
	delete(t.live, key)
	if el, ok := t.refused[key]; ok {
		t.forget(el)
	}
	t.refused[key] = t.order.PushBack(&refusal{key: key, until: now.Add(refusedFor)})
	// The oldest first: over the bound, or expired (every refusal lasts
	// refusedFor, so the list is in order of expiry too).
	for t.order.Len() > 0 {
		el := t.order.Front()
		if t.order.Len() <= maxRefused && now.Before(el.Value.(*refusal).until) {
			break
		}
		t.forget(el)
	}
}

// ended records that key's connection served and has ended: the next
// invocation naming it may dial it again.
func (t *callbackTable) ended(key string) { delete(t.live, key) }

func (t *callbackTable) forget(el *list.Element) {
	delete(t.refused, el.Value.(*refusal).key)
	t.order.Remove(el)
}

// sizes returns the live entries and the remembered refusals.
func (t *callbackTable) sizes() (live, refused int) { return len(t.live), t.order.Len() }

// registerCallbackGauges registers nimbus_rpc_callback_endpoints, the
// table's sizes by state (live, refused), on reg (nil: none).
func (s *Server) registerCallbackGauges(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, state := range []string{"live", "refused"} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "callback_endpoints",
			Help:        "Client callback endpoints the server is dialling or connected back to (live), and refusals it remembers (refused, at most 4096).",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 {
			s.mu.Lock()
			live, refused := s.mu.callbacks.sizes()
			s.mu.Unlock()
			if state == "live" {
				return float64(live)
			}
			return float64(refused)
		}))
	}
}
