package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The schema, version 1.
//
// nimbus_kv holds the whole ordered key space of store/keys.go, one row per
// key. The primary key's B-tree keeps keys in byte order (bytea compares
// as memcmp, no collation), so a directory's children ('i' parent name)
// are one contiguous range of the index and a listing is one index range
// scan. fillfactor 90 leaves room on each heap page for updated rows: an
// update that does not change the key (most of them: an inode's times,
// sizes, a counter) stays on its page as a heap-only tuple and writes no
// index entry. The table is not partitioned: docs/STORE.md has the
// measurement and the reasoning.
//
// nimbus_lock is a locking read of a batch of keys in one statement. It
// locks the rows that exist in the order given (FOR SHARE / FOR UPDATE
// after ORDER BY the position), then, for each key that has no row, a
// transaction-scoped advisory lock on the key's 64-bit hash in the same
// mode, and reads the key again in a statement of its own (a new snapshot:
// the row may have been inserted by the holder it waited for). SQL cannot
// lock a row that does not exist; the advisory lock gives a missing key the
// same exclusion as a row, as the store's other implementation does. Only
// missing keys take one, so PostgreSQL's lock table (sized by
// max_locks_per_transaction) holds a handful per transaction. lock_timeout
// bounds its waits as it bounds row-lock waits; a NOWAIT miss raises
// 55P03, as a NOWAIT row lock does.
//
// nimbus_schema has one row: the schema version. A database with a version
// this package does not know was written by a newer Nimbus and is refused.
const schemaV1 = `
CREATE TABLE nimbus_kv (
	key   bytea PRIMARY KEY,
	value bytea NOT NULL
) WITH (fillfactor = 90);
CREATE FUNCTION nimbus_lock(keys bytea[], hashes int8[], excl boolean, nowait boolean)
RETURNS TABLE (ord int8, value bytea) LANGUAGE plpgsql AS $fn$
DECLARE
	seen int8[] := '{}';
	got boolean;
BEGIN
	IF excl AND nowait THEN
		FOR ord, value IN SELECT r.ord, t.value FROM unnest(keys) WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key ORDER BY r.ord FOR UPDATE OF t NOWAIT LOOP
			seen := seen || ord; RETURN NEXT;
		END LOOP;
	ELSIF excl THEN
		FOR ord, value IN SELECT r.ord, t.value FROM unnest(keys) WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key ORDER BY r.ord FOR UPDATE OF t LOOP
			seen := seen || ord; RETURN NEXT;
		END LOOP;
	ELSIF nowait THEN
		FOR ord, value IN SELECT r.ord, t.value FROM unnest(keys) WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key ORDER BY r.ord FOR SHARE OF t NOWAIT LOOP
			seen := seen || ord; RETURN NEXT;
		END LOOP;
	ELSE
		FOR ord, value IN SELECT r.ord, t.value FROM unnest(keys) WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key ORDER BY r.ord FOR SHARE OF t LOOP
			seen := seen || ord; RETURN NEXT;
		END LOOP;
	END IF;
	IF cardinality(seen) = cardinality(keys) THEN
		RETURN;
	END IF;
	FOR i IN 1 .. cardinality(keys) LOOP
		CONTINUE WHEN i = ANY(seen);
		IF nowait THEN
			IF excl THEN got := pg_try_advisory_xact_lock(hashes[i]);
			ELSE got := pg_try_advisory_xact_lock_shared(hashes[i]);
			END IF;
			IF NOT got THEN
				RAISE EXCEPTION 'could not obtain lock on missing key' USING ERRCODE = '55P03';
			END IF;
		ELSIF excl THEN PERFORM pg_advisory_xact_lock(hashes[i]);
		ELSE PERFORM pg_advisory_xact_lock_shared(hashes[i]);
		END IF;
		ord := i;
		IF excl AND nowait THEN SELECT t.value INTO value FROM nimbus_kv t WHERE t.key = keys[i] FOR UPDATE NOWAIT;
		ELSIF excl THEN SELECT t.value INTO value FROM nimbus_kv t WHERE t.key = keys[i] FOR UPDATE;
		ELSIF nowait THEN SELECT t.value INTO value FROM nimbus_kv t WHERE t.key = keys[i] FOR SHARE NOWAIT;
		ELSE SELECT t.value INTO value FROM nimbus_kv t WHERE t.key = keys[i] FOR SHARE;
		END IF;
		IF FOUND THEN
			RETURN NEXT;
		END IF;
	END LOOP;
END
$fn$;
INSERT INTO nimbus_schema (version) VALUES (1);
`

// schemaV2 upgrades version 1 in place: nimbus_expect, the expectations
// of a commit (store.Expecter, guard.go). It takes the guards of keys
// (advisory locks on their hashes, shared, NoWait: 55P03), then reads each
// key in a statement of its own (a volatile function's statements each
// take a new snapshot, after the locks: a holder's commit is seen), and
// raises NX001 with the key's position as DETAIL when its row is missing
// or its value is above its bound.
const schemaV2 = `
CREATE OR REPLACE FUNCTION nimbus_expect(keys bytea[], hashes int8[], maxes bytea[])
RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
	v bytea;
BEGIN
	FOR i IN 1 .. cardinality(keys) LOOP
		IF NOT pg_try_advisory_xact_lock_shared(hashes[i]) THEN
			RAISE EXCEPTION 'could not obtain the guard of an expected key' USING ERRCODE = '55P03';
		END IF;
	END LOOP;
	FOR i IN 1 .. cardinality(keys) LOOP
		SELECT t.value INTO v FROM nimbus_kv t WHERE t.key = keys[i];
		IF NOT FOUND OR v > maxes[i] THEN
			RAISE EXCEPTION 'expectation % of the commit does not hold', i USING ERRCODE = 'NX001', DETAIL = i::text;
		END IF;
	END LOOP;
END
$fn$;
UPDATE nimbus_schema SET version = 2;
`

// schemaLock is the advisory lock that serialises schema creation by
// servers starting at once on a fresh database.
const schemaLock = 0x6e696d627573 // "nimbus"

// ensureSchema creates the schema on a fresh database and checks the version
// of an existing one, in one transaction that the session's
// statement_timeout does not bound; it returns the version found.
// With create false, a database without the schema is an error (ErrSchema)
// and nothing is written.
func ensureSchema(ctx context.Context, c *pgx.Conn, create bool) (int, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("schema: %w", err)
	}
	defer tx.Rollback(context.Background())
	// The session's statement_timeout bounds the operations' statements;
	// the schema's statements are bounded by ctx alone (Store.schemaTimeout).
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return 0, fmt.Errorf("schema: %w", err)
	}
	if !create {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('nimbus_schema') IS NOT NULL").Scan(&exists); err != nil {
			return 0, fmt.Errorf("schema: %w", err)
		}
		if !exists {
			return 0, fmt.Errorf("%w: the database holds no Nimbus namespace (no table nimbus_schema)", ErrSchema)
		}
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
		return 0, fmt.Errorf("schema: %w", err)
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS nimbus_schema (version integer NOT NULL, created timestamptz NOT NULL DEFAULT now())"); err != nil {
		return 0, fmt.Errorf("schema: create nimbus_schema: %w", err)
	}
	var version *int
	var rows int
	if err := tx.QueryRow(ctx, "SELECT max(version), count(*) FROM nimbus_schema").Scan(&version, &rows); err != nil {
		return 0, fmt.Errorf("schema: read version: %w", err)
	}
	switch {
	case version == nil && !create:
		return 0, fmt.Errorf("%w: the database holds no Nimbus namespace (nimbus_schema is empty)", ErrSchema)
	case version == nil:
		if _, err := tx.Exec(ctx, schemaV1); err != nil {
			return 0, fmt.Errorf("schema: create version 1: %w", err)
		}
		if _, err := tx.Exec(ctx, schemaV2); err != nil {
			return 0, fmt.Errorf("schema: create version %d: %w", SchemaVersion, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, fmt.Errorf("schema: create version %d: %w", SchemaVersion, err)
		}
		return SchemaVersion, nil
	case rows == 1 && *version == 1:
		// Version 1, upgraded in place (it only adds a function).
		if _, err := tx.Exec(ctx, schemaV2); err != nil {
			return 1, fmt.Errorf("schema: upgrade version 1 to %d: %w", SchemaVersion, err)
		}
		*version = SchemaVersion
	case rows != 1 || *version != SchemaVersion:
		return *version, fmt.Errorf("%w: the database has schema version %d (%d rows in nimbus_schema); this Nimbus knows version %d only: run the Nimbus that wrote it, or a newer one",
			ErrSchema, *version, rows, SchemaVersion)
	}
	var kv bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass('nimbus_kv') IS NOT NULL").Scan(&kv); err != nil {
		return 0, fmt.Errorf("schema: %w", err)
	}
	if !kv {
		return *version, fmt.Errorf("%w: nimbus_schema says version %d but the table nimbus_kv is missing", ErrSchema, *version)
	}
	return *version, tx.Commit(ctx)
}
