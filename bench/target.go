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

// FileCreator is implemented by targets that create a complete file with its
// content in one request (WebHDFS: CREATE with a body). Without it a file is
// made with Create, Write and Complete.
type FileCreator interface {
	CreateFile(ctx context.Context, u meta.User, path string, data []byte, perm meta.Perm, overwrite bool) error
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
}

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
	if fc, ok := env.FS.(FileCreator); ok {
		return fc.CreateFile(ctx, env.User, path, data, meta.DefaultFile, overwrite)
	}
	if _, err := env.FS.Create(ctx, env.User, path, meta.CreateOptions{Client: env.Client, Overwrite: overwrite}); err != nil {
		return err
	}
	if len(data) > 0 {
		if err := env.FS.Write(ctx, env.User, path, env.Client, 0, data); err != nil {
			return err
		}
	}
	_, err := env.FS.Complete(ctx, env.User, path, env.Client)
	return err
}
