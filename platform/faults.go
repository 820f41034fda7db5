package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault injection (docs/ELASTIC.md, "Faults"): the gateway can crash one of
// its instances on request, so that a benchmark (`nimbus bench elastic
// --kill-every`) can kill instances while load runs and check what the
// clients were told against the namespace. It is off unless
// GatewayOptions.FaultInjection is set (`nimbus serve --fault-injection`):
// anybody who can reach the gateway could otherwise take its instances
// down.
//
//	POST /platform/kill?deployment=D
//	  200 {"deployment":D,"instance":ID,"address":URL,"exited":true}
//	  400 bad or missing deployment; 403 fault injection off;
//	  409 the deployment has no serving instance

// ErrNoInstance: the deployment has no serving instance to kill.
var ErrNoInstance = errors.New("platform: no serving instance")

// Killed is the answer to a kill: the instance SIGKILLed and whether it
// had exited when the answer was written (KillWait).
type Killed struct {
	Deployment int        `json:"deployment"`
	Instance   InstanceID `json:"instance"`
	Address    string     `json:"address"`
	Exited     bool       `json:"exited"`
}

// killWait bounds the wait for a killed instance to exit before the kill
// is answered.
const killWait = time.Second

// Kill crashes one serving instance of deployment dep (Instance.Kill:
// SIGKILL for a process), the oldest, whose cache is the warmest: a crash,
// not a reclaim, so the platform sees it exit unasked, counts it in
// crashes_total and replaces it as the policy says. It waits up to a
// second for the exit. ErrNoInstance when dep has none serving.
func (l *Local) Kill(dep int) (Killed, error) {
	if dep < 0 || dep >= l.cfg.Deployments {
		return Killed{}, fmt.Errorf("platform: kill: deployment %d of %d", dep, l.cfg.Deployments)
	}
	l.mu.Lock()
	var victim *instanceRec
	for _, rec := range l.mu.insts {
		if rec.dep != dep || rec.inst == nil || rec.stopping || rec.state != StateServing {
			continue
		}
		if victim == nil || rec.id < victim.id {
			victim = rec
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return Killed{}, fmt.Errorf("platform: kill: deployment %d: %w", dep, ErrNoInstance)
	}
	k := Killed{Deployment: dep, Instance: victim.id, Address: victim.inst.Addr()}
	l.log.Warn("fault injection: killing an instance", "instance", victim.id, "deployment", dep, "addr", k.Address)
	if err := victim.inst.Kill(); err != nil {
		return k, fmt.Errorf("platform: kill instance %d: %w", victim.id, err)
	}
	select {
	case <-victim.inst.Done():
		k.Exited = true
	case <-time.After(killWait):
	}
	return k, nil
}

// registerFaults adds the fault-injection endpoints to the gateway's mux.
func (g *Gateway) registerFaults() {
	g.mux.HandleFunc("POST /platform/kill", g.kill)
}

func (g *Gateway) kill(w http.ResponseWriter, r *http.Request) {
	if !g.opts.FaultInjection {
		http.Error(w, "platform: fault injection is off (nimbus serve --fault-injection turns it on)", http.StatusForbidden)
		return
	}
	v := strings.TrimSpace(r.URL.Query().Get("deployment"))
	dep, err := strconv.Atoi(v)
	if err != nil || dep < 0 || dep >= g.l.Config().Deployments {
		http.Error(w, fmt.Sprintf("platform: kill: bad deployment %q: want 0 to %d", v, g.l.Config().Deployments-1), http.StatusBadRequest)
		return
	}
	k, err := g.l.Kill(dep)
	switch {
	case errors.Is(err, ErrNoInstance):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(k)
}
