package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL cluster of one test's own, for fault tests that
// kill, restart, replicate and promote it (the shared cluster of ServerURL
// serves other tests, which must not see that). It is stopped and its
// directory removed when the test ends, and by a watchdog if the test
// binary dies first. Its methods fail the test on error; they are not safe
// for concurrent use.
type Cluster struct {
	t      testing.TB
	bin    string
	dir    string
	data   string
	asUser string // "" or "postgres"
	port   int
	opts   string // the server's options, the same at every start
	dog    *os.File
}

// NewCluster initialises and starts a private cluster on 127.0.0.1 and a free
// port. It skips t when the PostgreSQL server binaries are not installed
// (NIMBUS_TEST_PG cannot stand in: a fault test kills its server).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c := newCluster(t)
	if err := run(c.asUser, filepath.Join(c.bin, "initdb"), "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("pgtest: initdb: %v", err)
	}
	c.startFirst()
	return c
}

// startFirst starts a new server. The free port may be taken by another
// process before the server binds it (the machine is shared): it tries a
// few.
func (c *Cluster) startFirst() {
	c.t.Helper()
	for try := 0; ; try++ {
		err := c.start()
		if err == nil {
			return
		}
		if try == 2 {
			c.t.Fatalf("pgtest: %v", err)
		}
		c.setPort(c.t)
	}
}

func newCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		t.Skip("pgtest: PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin): " +
			"install postgresql-15 (apt-get install postgresql-15, or scripts/pg.sh start); a fault test needs a server of its own to kill")
	}
	dir, err := os.MkdirTemp("", "nimbus-pgfault-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root and there is no user postgres to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asUser = "postgres"
	}
	c.setPort(t)
	c.dog = watchdog(filepath.Join(bin, "pg_ctl"), c.data, dir, c.asUser)
	t.Cleanup(func() {
		_ = run(c.asUser, filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(c.dir)
		if c.dog != nil {
			c.dog.Close()
		}
	})
	return c
}

// setPort picks a free port for the server.
func (c *Cluster) setPort(t testing.TB) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c.port = port
	c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100 -c shared_buffers=32MB", c.port, c.dir)
}

// Port is the server's port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Addr is 127.0.0.1:Port, for multi-host URLs.
func (c *Cluster) Addr() string { return fmt.Sprintf("127.0.0.1:%d", c.port) }

// URL is the URL of database db as the superuser postgres.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", c.Addr(), db)
}

// Exec runs one statement on database db.
func (c *Cluster) Exec(db, sql string, args ...any) {
	c.t.Helper()
	if err := exec1(c.URL(db), sql, args...); err != nil {
		c.t.Fatalf("pgtest: %s on %s: %v", sql, c.Addr(), err)
	}
}

// CreateDB creates database name and returns its URL.
func (c *Cluster) CreateDB(name string) string {
	c.t.Helper()
	c.Exec("postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return c.URL(name)
}

// Start starts the server (again: after Kill it runs crash recovery) and
// waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	if err := c.start(); err != nil {
		c.t.Fatalf("pgtest: %v", err)
	}
}

func (c *Cluster) start() error {
	if err := run(c.asUser, filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-l", filepath.Join(c.dir, "log"), "-o", c.opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pg_ctl start: %w\n%s", err, log)
	}
	return nil
}

// Kill sends SIGKILL to the postmaster and to every process it started, as a
// crash of the database's machine would end them, and waits until they are
// gone. Its clients see their connections reset and new ones refused.
func (c *Cluster) Kill() {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		c.t.Fatalf("pgtest: kill: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		c.t.Fatalf("pgtest: kill: postmaster.pid: %v", err)
	}
	// The children first listed, then the postmaster killed, so that it
	// cannot start new ones unseen; then the children.
	pids := append(children(pid), pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				c.t.Fatalf("pgtest: kill: process %d of the cluster on %s still alive after SIGKILL", p, c.Addr())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A killed postmaster can stay a zombie (its parent is whatever adopted
	// it, in a container maybe an init that never reaps), and to the next
	// postmaster a zombie's pid in postmaster.pid looks like a server still
	// running. Every process is gone: the locks (and the socket) are stale.
	stale, _ := filepath.Glob(filepath.Join(c.dir, ".s.PGSQL.*"))
	for _, f := range append(stale, filepath.Join(c.data, "postmaster.pid")) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			c.t.Fatalf("pgtest: kill: %v", err)
		}
	}
}

// tool finds a PostgreSQL program: beside pg_ctl, in Debian's
// /usr/lib/postgresql/*/bin (pg_ctl may have been found elsewhere, as a
// link), or on PATH.
func tool(bin, name string) string {
	if p := filepath.Join(bin, name); fileExists(p) {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads the state and parent of pid from /proc/pid/stat.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0][0], ppid: ppid}, true
}

// alive: pid exists and is not a zombie (a killed postmaster's parent may
// be slow to reap it, or never, in a container without an init).
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// NewStandby makes a synchronous streaming standby of c: a base backup of
// c (pg_basebackup -R, so it follows c), started on a port of its own; then
// c's synchronous_standby_names is set to '*' (any standby), so that from the return of
// NewStandby every commit on c is acknowledged only once the standby has
// it on disk (synchronous_commit = on). It waits until c reports the
// standby synchronous.
func (c *Cluster) NewStandby() *Cluster {
	c.t.Helper()
	s := newCluster(c.t)
	if err := run(s.asUser, tool(c.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres",
		"-D", s.data, "-R", "-X", "stream", "-c", "fast"); err != nil {
		c.t.Fatalf("pgtest: pg_basebackup: %v", err)
	}
	s.startFirst()
	c.Exec("postgres", "ALTER SYSTEM SET synchronous_standby_names = '*'")
	c.Exec("postgres", "SELECT pg_reload_conf()")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication").Scan(&state)
			conn.Close(ctx)
		}
		cancel()
		if state == "sync" {
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			c.t.Fatalf("pgtest: the standby on %s is not synchronous after 30 s (state %q, %v)\n%s", s.Addr(), state, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote makes a standby the primary (pg_ctl promote) and waits until it
// accepts writes.
func (c *Cluster) Promote() {
	c.t.Helper()
	if err := run(c.asUser, filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-w", "-t", "60", "promote"); err != nil {
		c.t.Fatalf("pgtest: pg_ctl promote: %v", err)
	}
}
