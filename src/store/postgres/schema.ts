import type pg from 'pg'

/**
 * Every object the store uses, by version. Each migration runs once per database (schema), in
 * its own transaction, and the applied versions are recorded in notes_migrations; start-up applies
 * the missing ones under an advisory lock, so instances starting together wait for each other.
 * Never change a shipped migration: add the next one.
 *
 * Why the shapes:
 * - notes.json is `text`, exactly as serialized (jsonb would reorder keys and drop duplicates).
 * - notes_clock is one row that every write locks first (FOR UPDATE) and updates in the same
 *   transaction: the change sequence follows commit order, ids are max(now, last id + 1) across
 *   instances, and the note and byte counts hold the caps across instances. Locking it first in
 *   every write also means no two writes can deadlock.
 * - notes_changes is the change feed's history (CHANGE_HISTORY), read by sequence.
 * - notes.search holds the note's string values, case-folded (search-text.ts), for the pg_trgm
 *   index that answers `q` (when the extension is available).
 */
const MIGRATIONS: readonly { version: number; sql: string }[] = [
  {
    version: 1,
    sql: `
CREATE TABLE notes_clock (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  epoch text NOT NULL,
  sequence bigint NOT NULL DEFAULT 0,
  last_id bigint NOT NULL DEFAULT 0,
  notes bigint NOT NULL DEFAULT 0,
  bytes bigint NOT NULL DEFAULT 0
);
INSERT INTO notes_clock (epoch)
  VALUES (to_hex((random() * 2147483647)::bigint) || to_hex((random() * 65535)::bigint));

CREATE TABLE notes (
  position bigint PRIMARY KEY,
  id double precision,
  json text NOT NULL,
  written bigint NOT NULL,
  modified bigint NOT NULL,
  search text NOT NULL
);
CREATE INDEX notes_by_id ON notes (id, position) WHERE id IS NOT NULL;

CREATE TABLE notes_changes (
  sequence bigint PRIMARY KEY,
  type text NOT NULL,
  data text NOT NULL
);

CREATE TABLE notes_idempotency (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  json text NOT NULL,
  written bigint NOT NULL,
  modified bigint NOT NULL,
  expires bigint NOT NULL
);
CREATE INDEX notes_idempotency_expires ON notes_idempotency (expires);

CREATE FUNCTION notes_record_change(p_seq bigint, p_type text, p_data text, p_history bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_history > 0 THEN
    INSERT INTO notes_changes VALUES (p_seq, p_type, p_data);
    IF p_seq % 64 = 0 THEN
      DELETE FROM notes_changes WHERE sequence <= p_seq - p_history;
    END IF;
  END IF;
  PERFORM pg_notify('notes_changes', p_seq::text);
END $$;

CREATE FUNCTION notes_create(
  p_now bigint, p_prefix text, p_suffix text, p_search text,
  p_max_notes bigint, p_max_bytes bigint, p_history bigint,
  p_key text, p_fingerprint text, p_key_expires bigint, p_max_keys bigint)
RETURNS TABLE (r_json text, r_written bigint, r_modified bigint, r_replayed boolean, r_fingerprint text)
LANGUAGE plpgsql AS $$
DECLARE
  c notes_clock%ROWTYPE;
  k notes_idempotency%ROWTYPE;
  v_id bigint;
  v_json text;
  v_seq bigint;
BEGIN
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  IF p_key IS NOT NULL THEN
    SELECT * INTO k FROM notes_idempotency WHERE key = p_key AND expires > p_now;
    IF FOUND THEN
      RETURN QUERY SELECT k.json, k.written, k.modified, true, k.fingerprint;
      RETURN;
    END IF;
  END IF;
  IF c.notes >= p_max_notes THEN
    RAISE EXCEPTION 'The store holds its maximum of % notes.', p_max_notes USING ERRCODE = 'NS507';
  END IF;
  v_id := greatest(p_now, c.last_id + 1);
  WHILE EXISTS (SELECT 1 FROM notes WHERE id = v_id) LOOP
    v_id := v_id + 1;
  END LOOP;
  v_json := p_prefix || v_id::text || p_suffix;
  IF c.bytes + octet_length(v_json) > p_max_bytes THEN
    RAISE EXCEPTION 'The store holds its maximum of % bytes of notes.', p_max_bytes USING ERRCODE = 'NS507';
  END IF;
  v_seq := c.sequence + 1;
  UPDATE notes_clock SET sequence = v_seq, last_id = v_id, notes = c.notes + 1,
    bytes = c.bytes + octet_length(v_json);
  INSERT INTO notes VALUES (v_seq, v_id, v_json, v_seq, p_now, p_search);
  PERFORM notes_record_change(v_seq, 'created', v_json, p_history);
  IF p_key IS NOT NULL THEN
    INSERT INTO notes_idempotency VALUES (p_key, p_fingerprint, v_json, v_seq, p_now, p_key_expires)
      ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, json = EXCLUDED.json,
        written = EXCLUDED.written, modified = EXCLUDED.modified, expires = EXCLUDED.expires;
    IF v_seq % 256 = 0 THEN
      DELETE FROM notes_idempotency WHERE expires <= p_now;
      DELETE FROM notes_idempotency WHERE key IN (
        SELECT key FROM notes_idempotency ORDER BY expires DESC OFFSET p_max_keys);
    END IF;
  END IF;
  RETURN QUERY SELECT v_json, v_seq, p_now, false, p_fingerprint;
END $$;

-- Writes the note at p_position if it is still as written at p_written; NULL when another write
-- came first (the caller reads the note again and retries).
CREATE FUNCTION notes_update(
  p_position bigint, p_written bigint, p_json text, p_id double precision, p_search text,
  p_now bigint, p_max_bytes bigint, p_history bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  c notes_clock%ROWTYPE;
  v_old bigint;
  v_growth bigint;
  v_seq bigint;
BEGIN
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  SELECT octet_length(json) INTO v_old FROM notes WHERE position = p_position AND written = p_written;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_growth := octet_length(p_json) - v_old;
  IF c.bytes + v_growth > p_max_bytes THEN
    RAISE EXCEPTION 'The store holds its maximum of % bytes of notes.', p_max_bytes USING ERRCODE = 'NS507';
  END IF;
  v_seq := c.sequence + 1;
  UPDATE notes_clock SET sequence = v_seq, bytes = c.bytes + v_growth;
  UPDATE notes SET json = p_json, id = p_id, written = v_seq, modified = p_now, search = p_search
    WHERE position = p_position;
  PERFORM notes_record_change(v_seq, 'updated', p_json, p_history);
  RETURN v_seq;
END $$;

CREATE FUNCTION notes_delete(p_position bigint, p_written bigint, p_data text, p_history bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  c notes_clock%ROWTYPE;
  v_old bigint;
  v_seq bigint;
BEGIN
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  DELETE FROM notes WHERE position = p_position AND written = p_written
    RETURNING octet_length(json) INTO v_old;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_seq := c.sequence + 1;
  UPDATE notes_clock SET sequence = v_seq, notes = c.notes - 1, bytes = c.bytes - v_old;
  PERFORM notes_record_change(v_seq, 'deleted', p_data, p_history);
  RETURN v_seq;
END $$;
`,
  },
  {
    // Group commit: the creates that arrive while another is being committed go in one statement,
    // one transaction, one flush (notes_create without the idempotency key, for each in turn). A
    // note past a cap gets its message in r_full; the others are stored.
    version: 2,
    sql: `
CREATE FUNCTION notes_create_many(
  p_now bigint[], p_prefix text[], p_suffix text[], p_search text[],
  p_max_notes bigint, p_max_bytes bigint, p_history bigint)
RETURNS TABLE (r_json text, r_written bigint, r_modified bigint, r_full text)
LANGUAGE plpgsql AS $$
DECLARE
  c notes_clock%ROWTYPE;
  v_id bigint;
  v_json text;
  v_bytes bigint;
BEGIN
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  FOR i IN 1 .. coalesce(array_length(p_now, 1), 0) LOOP
    IF c.notes >= p_max_notes THEN
      RETURN QUERY SELECT NULL::text, NULL::bigint, NULL::bigint,
        format('The store holds its maximum of %s notes.', p_max_notes);
      CONTINUE;
    END IF;
    v_id := greatest(p_now[i], c.last_id + 1);
    WHILE EXISTS (SELECT 1 FROM notes WHERE id = v_id) LOOP
      v_id := v_id + 1;
    END LOOP;
    v_json := p_prefix[i] || v_id::text || p_suffix[i];
    v_bytes := octet_length(v_json);
    IF c.bytes + v_bytes > p_max_bytes THEN
      RETURN QUERY SELECT NULL::text, NULL::bigint, NULL::bigint,
        format('The store holds its maximum of %s bytes of notes.', p_max_bytes);
      CONTINUE;
    END IF;
    c.sequence := c.sequence + 1;
    c.last_id := v_id;
    c.notes := c.notes + 1;
    c.bytes := c.bytes + v_bytes;
    INSERT INTO notes VALUES (c.sequence, v_id, v_json, c.sequence, p_now[i], p_search[i]);
    PERFORM notes_record_change(c.sequence, 'created', v_json, p_history);
    RETURN QUERY SELECT v_json, c.sequence, p_now[i], NULL::text;
  END LOOP;
  UPDATE notes_clock SET sequence = c.sequence, last_id = c.last_id, notes = c.notes, bytes = c.bytes;
END $$;
`,
  },
]

/** Any fixed number: the advisory lock that start-up migrations hold ("notes" in ASCII). */
const MIGRATION_LOCK = 0x6e6f746573

/**
 * Applies the migrations this database (schema) lacks, under the advisory lock. The pg_trgm index
 * is made when the extension can be created; without it `q` still works, by a scan.
 * @param epoch the version epoch of a schema created now (migration 1), instead of a random one;
 *   tests pass a fixed one. A schema that exists keeps its epoch.
 * @returns whether the search index exists.
 */
export async function migrate(
  client: pg.ClientBase,
  schema: string,
  epoch?: string,
): Promise<boolean> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`)
    await client.query(
      'CREATE TABLE IF NOT EXISTS notes_migrations (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())',
    )
    const { rows } = await client.query<{ version: number }>('SELECT version FROM notes_migrations')
    const applied = new Set(rows.map((row) => row.version))
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue
      await client.query('BEGIN')
      try {
        await client.query(migration.sql)
        if (migration.version === 1 && epoch !== undefined) {
          await client.query('UPDATE notes_clock SET epoch = $1', [epoch])
        }
        await client.query('INSERT INTO notes_migrations (version) VALUES ($1)', [
          migration.version,
        ])
        await client.query('COMMIT')
      } catch (err) {
        await client.query('ROLLBACK')
        throw err
      }
    }
    return await ensureSearchIndex(client)
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
  }
}

async function ensureSearchIndex(client: pg.ClientBase): Promise<boolean> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public')
    await client.query(
      'CREATE INDEX IF NOT EXISTS notes_search ON notes USING gin (search public.gin_trgm_ops)',
    )
    return true
  } catch {
    // contrib is not installed, or the role may not create extensions: `q` scans instead.
    return false
  }
}

/** 'notes' -> '"notes"'; 'a"b' -> '"a""b"' */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
