package candidates

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
	_ "modernc.org/sqlite"
)

// engine is the minimum the benchmark needs: a batched point read and a
// durable multi-row write.
type engine interface {
	read(keys [][]byte) (found int, err error)
	write(kvs [][2][]byte) error
	close() error
}

// --- Pebble ---

type pebbleEngine struct{ db *pebble.DB }

func openPebble(dir string) (engine, error) {
	cache := pebble.NewCache(256 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}})
	return &pebbleEngine{db}, err
}

func (e *pebbleEngine) read(keys [][]byte) (int, error) {
	n := 0
	for _, k := range keys {
		_, c, err := e.db.Get(k)
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
		c.Close()
	}
	return n, nil
}

func (e *pebbleEngine) write(kvs [][2][]byte) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, kv := range kvs {
		_ = b.Set(kv[0], kv[1], nil)
	}
	return b.Commit(pebble.Sync)
}

func (e *pebbleEngine) close() error { return e.db.Close() }

// --- bbolt ---

type boltEngine struct {
	db      *bolt.DB
	grouped bool // use db.Batch (bbolt's group commit) for concurrent writers
}

var bucket = []byte("kv")

func openBolt(dir string, grouped bool) (engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err })
	return &boltEngine{db: db, grouped: grouped}, err
}

func (e *boltEngine) read(keys [][]byte) (int, error) {
	n := 0
	err := e.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, k := range keys {
			if b.Get(k) != nil {
				n++
			}
		}
		return nil
	})
	return n, err
}

func (e *boltEngine) write(kvs [][2][]byte) error {
	fn := func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, kv := range kvs {
			if err := b.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	}
	if e.grouped {
		return e.db.Batch(fn)
	}
	return e.db.Update(fn)
}

func (e *boltEngine) close() error { return e.db.Close() }

// --- SQLite ---

type sqliteEngine struct {
	db   *sql.DB
	get7 *sql.Stmt
	put  *sql.Stmt
}

func openSQLite(dir string) (engine, error) {
	dsn := "file:" + filepath.Join(dir, "nimbus.db") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(20000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`); err != nil {
		return nil, err
	}
	e := &sqliteEngine{db: db}
	if e.get7, err = db.Prepare(`SELECT v FROM kv WHERE k IN (?` + strings.Repeat(",?", 6) + `)`); err != nil {
		return nil, err
	}
	if e.put, err = db.Prepare(`INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *sqliteEngine) read(keys [][]byte) (int, error) {
	if len(keys) != 7 {
		return 0, errors.New("sqlite engine reads batches of 7")
	}
	args := make([]any, 7)
	for i, k := range keys {
		args[i] = k
	}
	rows, err := e.get7.Query(args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

func (e *sqliteEngine) write(kvs [][2][]byte) error {
	tx, err := e.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st := tx.Stmt(e.put)
	for _, kv := range kvs {
		if _, err := st.Exec(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (e *sqliteEngine) close() error { return e.db.Close() }

func openEngine(name, dir string, goroutines int) (engine, error) {
	switch name {
	case "pebble":
		return openPebble(dir)
	case "bbolt":
		return openBolt(dir, goroutines > 1)
	case "sqlite":
		return openSQLite(dir)
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
