import { ARCHIVE_MIGRATION } from './archive-schema.js'
import { CHANGE_ORDER_MIGRATION } from './change-schema.js'
import { DIRECTORY_MIGRATION, MEMBER_SINCE_MIGRATION } from './directory-schema.js'
import { FILES_MIGRATION } from './files-schema.js'
import { UPLOAD_ROOM_MIGRATION, UPLOADS_MIGRATION } from './uploads-schema.js'

/**
 * Every object the store uses, by version. Each migration runs once per database (schema), in
 * its own transaction, and the applied versions are recorded in notes_migrations; start-up applies
 * the missing ones under an advisory lock (migrate, schema.ts), so instances starting together wait
 * for each other. Never change a shipped migration: add the next one.
 *
 * Why the shapes:
 * - notes.json is `text`, exactly as serialized (jsonb would reorder keys and drop duplicates).
 * - Every note, change and idempotency key belongs to a notebook (since migration 3): 'shared'
 *   for service keys and every note made before, 'user:<sub>' for a user. Each notebook has a
 *   clock row in notes_notebooks that its writes lock first (FOR UPDATE) and update in the same
 *   transaction: its change sequence follows commit order, and its note and byte counts hold its
 *   caps across instances. Its epoch is its own (UNIQUE), so no version token or ETag of one
 *   notebook is valid in another.
 * - notes_clock is the service's one row, which every write locks second: ids are
 *   max(now, last id + 1) over every notebook and instance, and the totals hold the service-wide
 *   caps. Locking the notebook's row, then this one, in every write (one notebook per
 *   transaction) means no two writes can deadlock. (Its epoch and sequence are those of the
 *   shared notebook before migration 3, copied there.)
 * - notes_changes is the change feed's history (CHANGE_HISTORY per notebook), read by sequence.
 * - notes.search holds the note's string values, case-folded (search-text.ts), for the pg_trgm
 *   index that answers `q` (when the extension is available).
 */
export const MIGRATIONS: readonly { version: number; sql: string }[] = [
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
  {
    // Notebooks (one per user, and 'shared', which holds every note made before): each has a
    // clock row of its own in notes_notebooks (its epoch, change sequence, note and byte counts),
    // and every note, change and idempotency key names its notebook. notes_clock stays the
    // service's: last_id (ids unique over every notebook) and the totals under the service-wide
    // caps. A write locks its notebook's row, then the service's (always in that order, one
    // notebook per transaction: no deadlock), and is numbered in its notebook's sequence.
    version: 3,
    sql: `
CREATE TABLE notes_notebooks (
  notebook text PRIMARY KEY,
  epoch text NOT NULL UNIQUE,
  sequence bigint NOT NULL DEFAULT 0,
  notes bigint NOT NULL DEFAULT 0,
  bytes bigint NOT NULL DEFAULT 0
);
INSERT INTO notes_notebooks (notebook, epoch, sequence, notes, bytes)
  SELECT 'shared', epoch, sequence, notes, bytes FROM notes_clock;

ALTER TABLE notes ADD COLUMN notebook text NOT NULL DEFAULT 'shared';
ALTER TABLE notes ALTER COLUMN notebook DROP DEFAULT;
ALTER TABLE notes DROP CONSTRAINT notes_pkey, ADD PRIMARY KEY (notebook, position);
DROP INDEX notes_by_id;
CREATE INDEX notes_by_id ON notes (id, notebook, position) WHERE id IS NOT NULL;

ALTER TABLE notes_changes ADD COLUMN notebook text NOT NULL DEFAULT 'shared';
ALTER TABLE notes_changes ALTER COLUMN notebook DROP DEFAULT;
ALTER TABLE notes_changes DROP CONSTRAINT notes_changes_pkey, ADD PRIMARY KEY (notebook, sequence);

ALTER TABLE notes_idempotency ADD COLUMN notebook text NOT NULL DEFAULT 'shared';
ALTER TABLE notes_idempotency ALTER COLUMN notebook DROP DEFAULT;
ALTER TABLE notes_idempotency DROP CONSTRAINT notes_idempotency_pkey, ADD PRIMARY KEY (notebook, key);

DROP FUNCTION notes_create(bigint, text, text, text, bigint, bigint, bigint, text, text, bigint, bigint);
DROP FUNCTION notes_create_many(bigint[], text[], text[], text[], bigint, bigint, bigint);
DROP FUNCTION notes_update(bigint, bigint, text, double precision, text, bigint, bigint, bigint);
DROP FUNCTION notes_delete(bigint, bigint, text, bigint);
DROP FUNCTION notes_record_change(bigint, text, text, bigint);

-- The notebook's clock row, made on its first use with p_epoch (another random one when p_epoch
-- is already another notebook's): its epoch and sequence.
CREATE FUNCTION notes_open_notebook(p_notebook text, p_epoch text)
RETURNS TABLE (r_epoch text, r_sequence bigint) LANGUAGE plpgsql AS $$
BEGIN
  LOOP
    BEGIN
      INSERT INTO notes_notebooks (notebook, epoch) VALUES (p_notebook, p_epoch)
        ON CONFLICT (notebook) DO NOTHING;
      EXIT;
    EXCEPTION WHEN unique_violation THEN
      p_epoch := to_hex(floor(random() * 281474976710655)::bigint);
    END;
  END LOOP;
  RETURN QUERY SELECT epoch, sequence FROM notes_notebooks WHERE notebook = p_notebook;
END $$;

-- Why p_notes more notes and p_bytes more bytes do not fit (NULL when they do): the notebook's
-- caps first, in p_holder's words ('This notebook', 'The store'), then the service's.
-- p_limits: the service's most notes and bytes, the notebook's most notes and bytes, the history.
CREATE FUNCTION notes_no_room(
  n notes_notebooks, c notes_clock, p_notes bigint, p_bytes bigint, p_limits bigint[], p_holder text)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF p_notes > 0 AND n.notes + p_notes > p_limits[3] THEN
    RETURN format('%s holds its maximum of %s notes.', p_holder, p_limits[3]);
  END IF;
  IF p_notes > 0 AND c.notes + p_notes > p_limits[1] THEN
    RETURN format('The service holds its maximum of %s notes.', p_limits[1]);
  END IF;
  IF p_bytes > 0 AND n.bytes + p_bytes > p_limits[4] THEN
    RETURN format('%s holds its maximum of %s bytes of notes.', p_holder, p_limits[4]);
  END IF;
  IF p_bytes > 0 AND c.bytes + p_bytes > p_limits[2] THEN
    RETURN format('The service holds its maximum of %s bytes of notes.', p_limits[2]);
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION notes_record_change(
  p_notebook text, p_seq bigint, p_type text, p_data text, p_history bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_history > 0 THEN
    INSERT INTO notes_changes (notebook, sequence, type, data) VALUES (p_notebook, p_seq, p_type, p_data);
    IF p_seq % 64 = 0 THEN
      DELETE FROM notes_changes WHERE notebook = p_notebook AND sequence <= p_seq - p_history;
    END IF;
  END IF;
  PERFORM pg_notify('notes_changes', p_notebook);
END $$;

-- Creates in one notebook, in order (one, or a group commit): one row each, with r_full set (and
-- nothing stored for it) when that note would pass a cap. With p_key (one create only), a key
-- seen before answers its note, r_replayed, and nothing is created.
CREATE FUNCTION notes_create(
  p_notebook text, p_now bigint[], p_prefix text[], p_suffix text[], p_search text[],
  p_limits bigint[], p_holder text,
  p_key text, p_fingerprint text, p_key_expires bigint, p_max_keys bigint)
RETURNS TABLE (r_json text, r_written bigint, r_modified bigint, r_full text,
  r_replayed boolean, r_fingerprint text)
LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  k notes_idempotency%ROWTYPE;
  v_id bigint;
  v_json text;
  v_full text;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'notebook % is not open', p_notebook;
  END IF;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  IF p_key IS NOT NULL THEN
    SELECT * INTO k FROM notes_idempotency
      WHERE notebook = p_notebook AND key = p_key AND expires > p_now[1];
    IF FOUND THEN
      RETURN QUERY SELECT k.json, k.written, k.modified, NULL::text, true, k.fingerprint;
      RETURN;
    END IF;
  END IF;
  FOR i IN 1 .. coalesce(array_length(p_now, 1), 0) LOOP
    v_full := notes_no_room(n, c, 1, 0, p_limits, p_holder);
    IF v_full IS NULL THEN
      v_id := greatest(p_now[i], c.last_id + 1);
      WHILE EXISTS (SELECT 1 FROM notes WHERE id = v_id) LOOP
        v_id := v_id + 1;
      END LOOP;
      v_json := p_prefix[i] || v_id::text || p_suffix[i];
      v_full := notes_no_room(n, c, 0, octet_length(v_json), p_limits, p_holder);
    END IF;
    IF v_full IS NOT NULL THEN
      IF p_key IS NOT NULL THEN
        RAISE EXCEPTION '%', v_full USING ERRCODE = 'NS507';
      END IF;
      RETURN QUERY SELECT NULL::text, NULL::bigint, NULL::bigint, v_full, false, NULL::text;
      CONTINUE;
    END IF;
    n.sequence := n.sequence + 1;
    n.notes := n.notes + 1;
    n.bytes := n.bytes + octet_length(v_json);
    c.last_id := v_id;
    c.notes := c.notes + 1;
    c.bytes := c.bytes + octet_length(v_json);
    INSERT INTO notes (notebook, position, id, json, written, modified, search)
      VALUES (p_notebook, n.sequence, v_id, v_json, n.sequence, p_now[i], p_search[i]);
    PERFORM notes_record_change(p_notebook, n.sequence, 'created', v_json, p_limits[5]);
    IF p_key IS NOT NULL THEN
      INSERT INTO notes_idempotency (notebook, key, fingerprint, json, written, modified, expires)
        VALUES (p_notebook, p_key, p_fingerprint, v_json, n.sequence, p_now[i], p_key_expires)
        ON CONFLICT (notebook, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
          json = EXCLUDED.json, written = EXCLUDED.written, modified = EXCLUDED.modified,
          expires = EXCLUDED.expires;
      IF n.sequence % 256 = 0 THEN
        DELETE FROM notes_idempotency WHERE notebook = p_notebook AND expires <= p_now[i];
        DELETE FROM notes_idempotency WHERE notebook = p_notebook AND key IN (
          SELECT key FROM notes_idempotency WHERE notebook = p_notebook
          ORDER BY expires DESC OFFSET p_max_keys);
      END IF;
    END IF;
    RETURN QUERY SELECT v_json, n.sequence, p_now[i], NULL::text, false, p_fingerprint;
  END LOOP;
  UPDATE notes_notebooks SET sequence = n.sequence, notes = n.notes, bytes = n.bytes
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET last_id = c.last_id, notes = c.notes, bytes = c.bytes;
END $$;

-- Writes the note at p_position if it is still as written at p_written; NULL when another write
-- came first (the caller reads the note again and retries).
CREATE FUNCTION notes_update(
  p_notebook text, p_position bigint, p_written bigint, p_json text, p_id double precision,
  p_search text, p_now bigint, p_limits bigint[], p_holder text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  v_old bigint;
  v_growth bigint;
  v_full text;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  SELECT octet_length(json) INTO v_old FROM notes
    WHERE notebook = p_notebook AND position = p_position AND written = p_written;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_growth := octet_length(p_json) - v_old;
  v_full := notes_no_room(n, c, 0, v_growth, p_limits, p_holder);
  IF v_full IS NOT NULL THEN
    RAISE EXCEPTION '%', v_full USING ERRCODE = 'NS507';
  END IF;
  n.sequence := n.sequence + 1;
  UPDATE notes_notebooks SET sequence = n.sequence, bytes = n.bytes + v_growth
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET bytes = c.bytes + v_growth;
  UPDATE notes SET json = p_json, id = p_id, written = n.sequence, modified = p_now, search = p_search
    WHERE notebook = p_notebook AND position = p_position;
  PERFORM notes_record_change(p_notebook, n.sequence, 'updated', p_json, p_limits[5]);
  RETURN n.sequence;
END $$;

CREATE FUNCTION notes_delete(
  p_notebook text, p_position bigint, p_written bigint, p_data text, p_history bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  v_old bigint;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  DELETE FROM notes WHERE notebook = p_notebook AND position = p_position AND written = p_written
    RETURNING octet_length(json) INTO v_old;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  n.sequence := n.sequence + 1;
  UPDATE notes_notebooks SET sequence = n.sequence, notes = n.notes - 1, bytes = n.bytes - v_old
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET notes = c.notes - 1, bytes = c.bytes - v_old;
  PERFORM notes_record_change(p_notebook, n.sequence, 'deleted', p_data, p_history);
  RETURN n.sequence;
END $$;
`,
  },
  DIRECTORY_MIGRATION,
  CHANGE_ORDER_MIGRATION,
  ARCHIVE_MIGRATION,
  FILES_MIGRATION,
  UPLOADS_MIGRATION,
  MEMBER_SINCE_MIGRATION,
  UPLOAD_ROOM_MIGRATION,
]
