// Package pgtest gives tests a real PostgreSQL server and a fresh database
// on it.
//
// With NIMBUS_TEST_PG set (a libpq URL of a server where the test's role may
// CREATE DATABASE) the tests use that server. Otherwise the first test that
// asks starts a private cluster for the whole test binary: initdb and pg_ctl
// in a temporary directory, on 127.0.0.1 and a free port, as the user
// postgres when the test runs as root (the server refuses to run as root).
// A watchdog process stops it and removes its directory when the test
// binary exits, however it exits (its end of a pipe closes); Main stops it
// at once when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// A test is skipped only when neither is possible because the PostgreSQL
// server binaries are not installed; the skip message says how to get them.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// EnvURL names the environment variable of an external server.
const EnvURL = "NIMBUS_TEST_PG"

var cluster struct {
	once    sync.Once
	url     string // admin URL (database postgres)
	err     error
	skip    string // why tests skip: no binaries
	dir     string
	pgCtl   string
	asUser  string // "" or "postgres"
	stopped bool
	// watchdog's stdin: the watchdog stops the cluster when it reads EOF,
	// which the kernel delivers when this process exits. Held here so that
	// it is not collected (and closed) before.
	watchdog *os.File
}

// Main runs the tests, then stops the private cluster if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the private cluster (if this binary started one) and removes
// its directory. Safe to call more than once.
func Stop() {
	if cluster.dir == "" || cluster.stopped {
		return
	}
	cluster.stopped = true
	_ = run(cluster.asUser, cluster.pgCtl, "-D", filepath.Join(cluster.dir, "data"), "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(cluster.dir)
	if cluster.watchdog != nil {
		cluster.watchdog.Close()
	}
}

// ServerURL returns the URL of the server's maintenance database (postgres),
// starting the private cluster on first use; it skips t when PostgreSQL is
// not installed, and fails it when the server cannot be started.
func ServerURL(t testing.TB) string {
	t.Helper()
	cluster.once.Do(start)
	if cluster.skip != "" {
		t.Skip(cluster.skip)
	}
	if cluster.err != nil {
		t.Fatalf("pgtest: %v", cluster.err)
	}
	return cluster.url
}

// DB creates a fresh, empty database for t and returns its URL; it is dropped
// when t ends.
func DB(t testing.TB) string {
	t.Helper()
	var b [8]byte
	now := time.Now().UnixNano()
	for i := range b {
		b[i] = byte(now >> (8 * i))
	}
	sum := sha256.Sum256(append(b[:], t.Name()...))
	return NamedDB(t, "nimbus_t_"+hex.EncodeToString(sum[:8]))
}

// DBFor returns the URL of the database that stands for key (a directory, say):
// the same key gives the same database for the life of the test binary, so
// a store reopened "in the same directory" finds its rows. It is created on
// first use and dropped when the t that created it ends.
func DBFor(t testing.TB, key string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(key))
	return NamedDB(t, "nimbus_d_"+hex.EncodeToString(sum[:8]))
}

var created sync.Map // database name -> struct{}

// NamedDB creates database name unless this binary did already, and returns
// its URL. The creator's t drops it at its end.
func NamedDB(t testing.TB, name string) string {
	t.Helper()
	admin := ServerURL(t)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: server URL: %v", err)
	}
	u.Path = "/" + name
	if _, loaded := created.LoadOrStore(name, struct{}{}); loaded {
		return u.String()
	}
	if err := exec1(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		created.Delete(name)
		if err := exec1(admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return u.String()
}

// Exec runs one statement on the database at dbURL (for tests that tamper
// with a store's tables).
func Exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	if err := exec1(dbURL, sql, args...); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func exec1(dbURL, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql, args...)
	return err
}

// BinDir finds the PostgreSQL server binaries: the directory of pg_ctl on
// PATH, else the newest /usr/lib/postgresql/*/bin (Debian keeps them off
// PATH). "" when there are none.
func BinDir() string {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "initdb")); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func start() {
	if u := os.Getenv(EnvURL); u != "" {
		cluster.url = u
		cluster.err = exec1(u, "SELECT 1")
		if cluster.err != nil {
			cluster.err = fmt.Errorf("%s=%s: %w", EnvURL, u, cluster.err)
		}
		return
	}
	bin := BinDir()
	if bin == "" {
		cluster.skip = "pgtest: PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin): " +
			"install postgresql-15 (apt-get install postgresql-15, or scripts/pg.sh start) or set " + EnvURL + " to a server's URL"
		return
	}
	cluster.url, cluster.err = startCluster(bin)
}

// startCluster initialises and starts a cluster in a new temporary directory.
func startCluster(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "nimbus-pgtest-")
	if err != nil {
		return "", err
	}
	cluster.dir = dir
	cluster.pgCtl = filepath.Join(bin, "pg_ctl")
	if os.Geteuid() == 0 {
		// initdb and postgres refuse root: run them as postgres, which
		// must own the directory.
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("running as root and there is no user postgres to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
		cluster.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if err := run(cluster.asUser, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return "", fmt.Errorf("initdb: %w", err)
	}
	// PostgreSQL takes its port from the command line (its socket's name
	// and the URL need it before it binds), so the port is picked before
	// the server binds it, and another process on the shared machine may
	// take it meanwhile: a failed start tries another port, as
	// Cluster.startFirst does.
	var port int
	for try := 0; ; try++ {
		if port, err = freePort(); err != nil {
			return "", err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=64MB", port, dir)
		err = run(cluster.asUser, cluster.pgCtl, "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			break
		}
		if try == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return "", fmt.Errorf("pg_ctl start: %w\n%s", err, log)
		}
	}
	startWatchdog(data)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), nil
}

// startWatchdog starts a shell that waits for EOF on a pipe from this
// process, then stops the cluster and removes its directory: a test binary
// killed (or one without Main) leaves no server behind. It is in a process
// group of its own, so that an interrupt of the tests does not stop it
// before it has stopped the server.
func startWatchdog(data string) {
	cluster.watchdog = watchdog(cluster.pgCtl, data, cluster.dir, cluster.asUser)
}

// watchdog starts the shell of startWatchdog for the cluster in data under
// dir and returns its end of the pipe (nil if it could not start).
func watchdog(pgCtl, data, dir, asUser string) *os.File {
	stop := fmt.Sprintf("%s -D %s -m immediate -w stop", pgCtl, data)
	if asUser != "" {
		stop = "runuser -u " + asUser + " -- " + stop
	}
	return testproc.Watchdog(stop + " >/dev/null 2>&1; rm -rf " + dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run runs a PostgreSQL program, as asUser when set (we are root then).
func run(asUser, prog string, args ...string) error {
	var cmd *exec.Cmd
	if asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", asUser, "--", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	cmd.Dir = "/" // the postgres user may not be able to enter the caller's directory
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}
