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
//   - the dials in progress to one host are bounded (maxDialsPerHost), so
//     that endpoints whose dials hang (a host that drops connection
//     attempts costs each dial its timeout) cannot take every live entry
//     from other clients' hosts;
//   - a refusal is remembered for refusedFor, so that an endpoint that
//     refused is not dialled on each of its client's invocations; past
//     maxRefused refusals the oldest is forgotten first, and an expired
//     one is forgotten when met. A flood of refusing endpoints therefore
//     costs each of them a dial, and pushes older refusals out, but never
//     fills the table.
//
// It is not safe for concurrent use: the server holds s.mu around it.
type callbackTable struct {
	live    map[string]*liveCallback
	dialing map[string]int           // dials in progress by host
	refused map[string]*list.Element // of *refusal, in order
	order   list.List                // refusals, oldest first
}

// liveCallback is one endpoint being dialled or connected back to.
type liveCallback struct {
	host    string
	dialing bool // not yet connected: counted in dialing[host]
}

// refusal is one remembered refusal.
type refusal struct {
	key   string
	until time.Time
}

// maxRefused bounds the refusals a server remembers.
const maxRefused = 4096

// maxDialsPerHost bounds the dials in progress to one host. A dial to a
// host that answers (with a connection or a refusal) takes a loopback or
// network round trip; a host's clients start a few at once.
const maxDialsPerHost = 64

func newCallbackTable() *callbackTable {
	return &callbackTable{live: map[string]*liveCallback{}, dialing: map[string]int{}, refused: map[string]*list.Element{}}
}

// begin reports whether key, an endpoint on host, should be dialled now:
// it is not live, not refused within refusedFor, and the live entries and
// host's dials are under their bounds. When it reports true, key is live,
// dialling, until connected, failed or ended.
func (t *callbackTable) begin(key, host string, now time.Time) bool {
	if _, ok := t.live[key]; ok {
		return false
	}
	if el, ok := t.refused[key]; ok {
		if now.Before(el.Value.(*refusal).until) {
			return false
		}
		t.forget(el)
	}
	if len(t.live) >= maxCallbacks || t.dialing[host] >= maxDialsPerHost {
		return false
	}
	t.live[key] = &liveCallback{host: host, dialing: true}
	t.dialing[host]++
	return true
}

// connected records that key's dial succeeded and its hello was accepted.
func (t *callbackTable) connected(key string) {
	if lc, ok := t.live[key]; ok {
		t.undial(lc)
	}
}

// undial takes lc out of its host's dials in progress.
func (t *callbackTable) undial(lc *liveCallback) {
	if !lc.dialing {
		return
	}
	lc.dialing = false
	if t.dialing[lc.host]--; t.dialing[lc.host] <= 0 {
		delete(t.dialing, lc.host)
	}
}

// drop removes key from the live entries.
func (t *callbackTable) drop(key string) {
	if lc, ok := t.live[key]; ok {
		t.undial(lc)
		delete(t.live, key)
	}
}

// failed records that key's dial was refused or unreachable: it is not
// dialled again before now+refusedFor, unless it is forgotten first.
func (t *callbackTable) failed(key string, now time.Time) {
	t.drop(key)
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
func (t *callbackTable) ended(key string) { t.drop(key) }

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
