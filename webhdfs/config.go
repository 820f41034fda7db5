package webhdfs

import (
	"errors"
	"fmt"
	"github.com/nimbus-fs/nimbus/tenant"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PathPrefix is the URL path under which WebHDFS is served.
const PathPrefix = "/webhdfs/v1"

// Config configures a Handler.
type Config struct {
	// Advertise is the base address put in redirect Locations, e.g.
	// "http://nimbus.example:9870" or "nimbus.example:9870" (http assumed).
	// Empty: the scheme and Host of the request being answered, which is right
	// unless a proxy or container network rewrites addresses.
	Advertise string
	// DefaultUser is the caller when a request has no user.name ("dr.who",
	// HDFS's anonymous web user, by default).
	DefaultUser string
	// Superuser may act as any user with doas. Empty: nobody may.
	Superuser string
	// ListBatch is the number of entries per LISTSTATUS_BATCH page and per
	// List call while streaming LISTSTATUS (HDFS's dfs.ls.limit, 1000).
	ListBatch int
	// WriteChunk is the largest slice handed to meta.FileSystem.Write (64 KiB).
	WriteChunk int
	// ReadChunk is the length of each meta.FileSystem.Read (1 MiB).
	ReadChunk int
	// BodyIdleTimeout bounds each read of a CREATE or APPEND body: a client
	// that sends nothing for this long fails its upload (400, nothing of it
	// is kept) and loses the connection (30s).
	BodyIdleTimeout time.Duration
	// StatfsDir, when set, is a directory whose file system's size and free
	// space GETSTATUS reports as capacity and remaining.
	StatfsDir string
	// Logger receives 5xx responses at error level. Nil: nothing is logged.
	Logger *slog.Logger
	// Registerer receives the metrics (metrics.go). Nil: not registered.
	Registerer prometheus.Registerer
	// Tenants, when set, counts every request under its tenant (user.name,
	// or user.name/job with the Nimbus parameter job=JOB) and refuses,
	// retryably (503, RetriableException), those over a tenant's limit.
	Tenants *tenant.Tracker
	// Meter, when set, records every request as instance activity (what a
	// serverless platform bills: platform.Meter).
	Meter interface {
		Begin()
		End()
	}
}

// DefaultConfig returns the defaults described on each field.
func DefaultConfig() Config {
	return Config{
		DefaultUser: "dr.who",
		ListBatch:   1000,
		WriteChunk:  64 << 10,
		ReadChunk:   1 << 20,

		BodyIdleTimeout: 30 * time.Second,
	}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("webhdfs: invalid config")

// userPattern is HDFS's default dfs.webhdfs.user.provider.user.pattern,
// widened to accept '@' (Kerberos-style principals used as simple names).
var userPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._@-]*\$?$`)

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Advertise != "" {
		if _, err := advertiseBase(c.Advertise); err != nil {
			return fmt.Errorf("%w: Advertise %q: %w", ErrConfig, c.Advertise, err)
		}
	}
	if !validUser(c.DefaultUser) {
		return fmt.Errorf("%w: DefaultUser %q is not a valid user name", ErrConfig, c.DefaultUser)
	}
	if c.Superuser != "" && !validUser(c.Superuser) {
		return fmt.Errorf("%w: Superuser %q is not a valid user name", ErrConfig, c.Superuser)
	}
	if c.ListBatch <= 0 {
		return fmt.Errorf("%w: ListBatch = %d, want > 0", ErrConfig, c.ListBatch)
	}
	if c.WriteChunk <= 0 || c.WriteChunk > 64<<20 {
		return fmt.Errorf("%w: WriteChunk = %d, want 1..64 MiB", ErrConfig, c.WriteChunk)
	}
	if c.ReadChunk <= 0 || c.ReadChunk > 64<<20 {
		return fmt.Errorf("%w: ReadChunk = %d, want 1..64 MiB", ErrConfig, c.ReadChunk)
	}
	if c.BodyIdleTimeout <= 0 {
		return fmt.Errorf("%w: BodyIdleTimeout = %v, want > 0", ErrConfig, c.BodyIdleTimeout)
	}
	return nil
}

func validUser(u string) bool { return len(u) <= 256 && userPattern.MatchString(u) }

// advertiseBase turns "host:port" or "scheme://host:port[/]" into
// "scheme://host:port".
func advertiseBase(a string) (string, error) {
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q, want http or https", u.Scheme)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", errors.New("want [scheme://]host:port with no path or query")
	}
	return u.Scheme + "://" + u.Host, nil
}
