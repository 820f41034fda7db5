package bench

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
)

// Target is what every workload is written against: the namespace contract
// plus a no-op that crosses the same transport, used as the ceiling every
// metadata result is compared with. Implementations must be safe for
// concurrent use by all clients of a run.
type Target interface {
	meta.FileSystem
	// Echo sends a request that does no work on the server over the same
	// transport as the metadata operations. For WebHDFS targets it is a
	// GETFILESTATUS of "/", the cheapest request that protocol has.
	Echo(ctx context.Context) error
}

// HTTPEchoer is implemented by targets that also offer a no-op over their HTTP
// endpoint (Nimbus's client: EchoHTTP). The echo workload measures it beside
// Echo when present.
type HTTPEchoer interface {
	EchoHTTP(ctx context.Context) error
}

// Env is one connected target and how to describe it in results. The caller
// owns FS and closes it after the run.
type Env struct {
	FS         Target
	Target     string    // as the user named it: "embedded", "nimbus://h:p", "webhdfs://h:p"
	System     string    // label for tables and charts: "nimbus-rpc", "hdfs-webhdfs", ...
	MetricsURL string    // Prometheus text endpoint of the server, or a JMX /jmx URL; "" when unknown
	User       meta.User // the caller of every operation
	Client     string    // lease holder name passed to Create
	// Profile names the server configuration the run measures (a baseline
	// of the λFS evaluation: hopsfs, hopsfs-cache, ...), and ServerFlags
	// are the `nimbus serve` flags it stands for; both go into every
	// result. Empty: none given.
	Profile     string
	ServerFlags []string
	// Transport, for a hybrid client, reads the requests it sent so far
	// over TCP and over HTTP invocations; nil otherwise.
	Transport func() (tcp, http int64)
}

// serverProbe reads the server's counters around measured runs (nil when
// MetricsURL is empty).
func (e *Env) serverProbe() *ServerProbe { return NewServerProbe(e.MetricsURL) }

// Validate reports a missing field.
func (e *Env) Validate() error {
	switch {
	case e == nil || e.FS == nil:
		return errors.New("bench: env has no target")
	case e.User.Name == "":
		return errors.New("bench: env has no user")
	case e.Client == "":
		return errors.New("bench: env has no client name")
	}
	return nil
}

// label is the system name used in results.
func (e *Env) label() string {
	if e.System != "" {
		return e.System
	}
	return e.Target
}

// createFile makes a complete file holding data, in one request when the
// target can.
func createFile(ctx context.Context, env *Env, path string, data []byte, overwrite bool) error {
	// One request where the target can (meta.FileCreator: Nimbus's RPC,
	// WebHDFS's CREATE with a body), else create, write and complete.
	_, err := meta.CreateFile(ctx, env.FS, env.User, path,
		meta.CreateOptions{Client: env.Client, Overwrite: overwrite, Perm: meta.DefaultFile}, data)
	return err
}
