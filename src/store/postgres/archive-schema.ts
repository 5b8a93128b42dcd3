/**
 * Migration 6 (MIGRATIONS, migrations.ts): history and trash.
 *
 * - notes_revisions holds each note's PAST states only: the current state is the note's own row
 *   (its json, `written` as its version, `modified` as its time; 'created' when written =
 *   position, which only a create, a restore from the trash or an import leaves). An update moves
 *   the state it replaces there, in the same call of notes_update, so a PATCH stays one round trip
 *   and a create costs nothing more. Revisions are keyed by the note's list position, which a
 *   restore from the trash renumbers (the note goes to the end of the list). notes.revisions
 *   (and notes_trash.revisions) counts them, at least as many as there are, so that a write
 *   knows when to trim without a scan.
 * - notes_trash holds deleted notes (with their search text, so that a restore puts back the very
 *   row), numbered by the delete's change sequence. They count toward the caps: trash_notes and
 *   trash_bytes on the notebook's clock row and on the service's, beside the live counts that
 *   stats report. Trash past its time is counted only when a cap would refuse (notes_no_room
 *   then counts what is still within it), and removed by the notebook's next delete or trash act.
 * - notes_clock.history_bytes counts the past revisions' bytes over the service: past the bound,
 *   the oldest go (notes_trim_revisions), under the service's clock row that every write holds.
 *
 * p_limits, the array every write function takes: the service's most notes and bytes, the
 * notebook's most notes and bytes, the change history kept, then the revisions a note keeps (its
 * current state included), their age limit in ms, the service's bytes of past revisions, and the
 * trash's time in ms (0: no trash).
 */
export const ARCHIVE_MIGRATION: { version: number; sql: string } = {
  version: 6,
  sql: `
ALTER TABLE notes_notebooks ADD COLUMN trash_notes bigint NOT NULL DEFAULT 0,
  ADD COLUMN trash_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE notes ADD COLUMN revisions integer NOT NULL DEFAULT 0;
ALTER TABLE notes_clock ADD COLUMN trash_notes bigint NOT NULL DEFAULT 0,
  ADD COLUMN trash_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN history_bytes bigint NOT NULL DEFAULT 0;

CREATE TABLE notes_revisions (
  notebook text NOT NULL,
  position bigint NOT NULL,
  sequence bigint NOT NULL,
  at bigint NOT NULL,
  change text NOT NULL CHECK (change IN ('created', 'updated')),
  json text NOT NULL,
  PRIMARY KEY (notebook, position, sequence)
);
CREATE INDEX notes_revisions_by_age ON notes_revisions (at);

CREATE TABLE notes_trash (
  notebook text NOT NULL,
  sequence bigint NOT NULL,
  position bigint NOT NULL,
  id double precision,
  json text NOT NULL,
  written bigint NOT NULL,
  modified bigint NOT NULL,
  search text NOT NULL,
  revisions integer NOT NULL,
  deleted bigint NOT NULL,
  PRIMARY KEY (notebook, sequence)
);
CREATE INDEX notes_trash_by_id ON notes_trash (notebook, id, sequence) WHERE id IS NOT NULL;
CREATE INDEX notes_trash_by_age ON notes_trash (notebook, deleted);

-- As before, with the trash counted toward every cap; what passed its time (p_limits[9]) is left
-- out, counted exactly only when the counts with it would refuse. A refusal of the notebook's
-- caps while its trash holds notes ends in ' [trash]' (storeFull, queries.ts, gives the advice).
DROP FUNCTION notes_no_room(notes_notebooks, notes_clock, bigint, bigint, bigint[], text);
CREATE FUNCTION notes_no_room(
  n notes_notebooks, c notes_clock, p_notes bigint, p_bytes bigint, p_limits bigint[],
  p_holder text, p_now bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_notes bigint := n.trash_notes;
  v_bytes bigint := n.trash_bytes;
BEGIN
  IF v_notes > 0 AND ((p_notes > 0 AND n.notes + v_notes + p_notes > p_limits[3])
      OR (p_bytes > 0 AND n.bytes + v_bytes + p_bytes > p_limits[4])) THEN
    SELECT count(*), coalesce(sum(octet_length(json)), 0) INTO v_notes, v_bytes FROM notes_trash
      WHERE notebook = n.notebook AND deleted > p_now - p_limits[9];
  END IF;
  IF p_notes > 0 AND n.notes + v_notes + p_notes > p_limits[3] THEN
    RETURN format('%s holds its maximum of %s notes.', p_holder, p_limits[3])
      || CASE WHEN v_notes > 0 THEN ' [trash]' ELSE '' END;
  END IF;
  IF p_bytes > 0 AND n.bytes + v_bytes + p_bytes > p_limits[4] THEN
    RETURN format('%s holds its maximum of %s bytes of notes.', p_holder, p_limits[4])
      || CASE WHEN v_notes > 0 THEN ' [trash]' ELSE '' END;
  END IF;
  v_notes := c.trash_notes;
  v_bytes := c.trash_bytes;
  IF v_notes > 0 AND ((p_notes > 0 AND c.notes + v_notes + p_notes > p_limits[1])
      OR (p_bytes > 0 AND c.bytes + v_bytes + p_bytes > p_limits[2])) THEN
    SELECT count(*), coalesce(sum(octet_length(json)), 0) INTO v_notes, v_bytes FROM notes_trash
      WHERE deleted > p_now - p_limits[9];
  END IF;
  IF p_notes > 0 AND c.notes + v_notes + p_notes > p_limits[1] THEN
    RETURN format('The service holds its maximum of %s notes.', p_limits[1]);
  END IF;
  IF p_bytes > 0 AND c.bytes + v_bytes + p_bytes > p_limits[2] THEN
    RETURN format('The service holds its maximum of %s bytes of notes.', p_limits[2]);
  END IF;
  RETURN NULL;
END $$;

-- Lets the past revisions of the note at p_position go beyond the newest p_limits[6] - 1, those
-- of them past their age (p_limits[7]), and the service's, oldest first, beyond p_limits[8]
-- bytes. p_count: how many the note has, or more (notes.revisions: a trim of the service's oldest
-- leaves other notes' counts high); p_held: the service's bytes of past revisions. Answers both
-- after. The caller holds the service's clock row.
-- Why from the newest, at most p_count of them: the revisions deleted stay in the indexes until
-- a vacuum, and a scan that starts from the oldest (or goes on past the last one there is) walks
-- every one of them.
CREATE FUNCTION notes_trim_revisions(
  p_notebook text, p_position bigint, p_count bigint, p_now bigint, p_limits bigint[],
  p_held bigint, OUT r_count bigint, OUT r_held bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_newest bigint[];
  v_gone bigint;
  r record;
BEGIN
  v_newest := ARRAY(SELECT sequence FROM notes_revisions
    WHERE notebook = p_notebook AND position = p_position ORDER BY sequence DESC LIMIT p_count);
  r_count := coalesce(array_length(v_newest, 1), 0);
  r_held := p_held;
  WITH gone AS (
    DELETE FROM notes_revisions
    WHERE notebook = p_notebook AND position = p_position AND sequence = ANY (v_newest)
      AND (sequence < v_newest[greatest(p_limits[6] - 1, 0)] OR p_limits[6] <= 1
        OR at <= p_now - p_limits[7])
    RETURNING octet_length(json) AS bytes)
  SELECT r_count - count(*), r_held - coalesce(sum(bytes), 0) INTO r_count, r_held FROM gone;
  IF r_held > p_limits[8] THEN
    FOR r IN SELECT notebook, position, sequence, octet_length(json) AS bytes
        FROM notes_revisions ORDER BY at LOOP
      EXIT WHEN r_held <= p_limits[8];
      DELETE FROM notes_revisions
        WHERE notebook = r.notebook AND position = r.position AND sequence = r.sequence;
      r_held := r_held - r.bytes;
      IF r.notebook = p_notebook AND r.position = p_position THEN
        r_count := r_count - 1;
      END IF;
    END LOOP;
  END IF;
END $$;

-- Whether the note's past revisions (p_count, as notes.revisions counts them) or the service's
-- bytes of them (p_held) call for notes_trim_revisions now: the note's a few past the limit, so
-- that a write trims once in several (reads show no more than the limit), the service's at once.
CREATE FUNCTION notes_trim_due(p_count bigint, p_held bigint, p_sequence bigint, p_limits bigint[])
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT p_count > p_limits[6] - 1 + (p_limits[6] - 1) / 8 OR p_held > p_limits[8]
    OR p_sequence % 64 = 0
$$;

-- Removes the trashed notes of p_notebook with these sequences, with their revisions, for good,
-- giving their room back to the notebook's and the service's counts; answers how many went.
-- The caller holds the notebook's clock row (this locks the service's after it).
CREATE FUNCTION notes_remove_trash(p_notebook text, p_sequences bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_notes bigint;
  v_bytes bigint;
  v_history bigint;
BEGIN
  -- The service's row before any revision: the trim of the oldest (notes_trim_revisions) deletes
  -- revisions of every notebook under it, so a delete of them without it could deadlock.
  PERFORM 1 FROM notes_clock FOR UPDATE;
  WITH gone AS (
    DELETE FROM notes_trash WHERE notebook = p_notebook AND sequence = ANY (p_sequences)
    RETURNING position, octet_length(json) AS bytes),
  revisions AS (
    DELETE FROM notes_revisions r USING gone
    WHERE r.notebook = p_notebook AND r.position = gone.position
    RETURNING octet_length(r.json) AS bytes)
  SELECT (SELECT count(*) FROM gone), (SELECT coalesce(sum(bytes), 0) FROM gone),
    (SELECT coalesce(sum(bytes), 0) FROM revisions)
  INTO v_notes, v_bytes, v_history;
  IF v_notes = 0 THEN
    RETURN 0;
  END IF;
  UPDATE notes_notebooks SET trash_notes = trash_notes - v_notes, trash_bytes = trash_bytes - v_bytes
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET trash_notes = trash_notes - v_notes, trash_bytes = trash_bytes - v_bytes,
    history_bytes = history_bytes - v_history;
  RETURN v_notes;
END $$;

-- The notebook's trashed notes past their time go (the caller holds its clock row).
CREATE FUNCTION notes_expire_trash(p_notebook text, p_now bigint, p_trash_ms bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM notes_trash
      WHERE notebook = p_notebook AND deleted <= p_now - p_trash_ms) THEN
    PERFORM notes_remove_trash(p_notebook, ARRAY(SELECT sequence FROM notes_trash
      WHERE notebook = p_notebook AND deleted <= p_now - p_trash_ms));
  END IF;
END $$;

CREATE OR REPLACE FUNCTION notes_create(
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
    v_full := notes_no_room(n, c, 1, 0, p_limits, p_holder, p_now[i]);
    IF v_full IS NULL THEN
      v_id := greatest(p_now[i], c.last_id + 1);
      WHILE EXISTS (SELECT 1 FROM notes WHERE id = v_id) LOOP
        v_id := v_id + 1;
      END LOOP;
      v_json := p_prefix[i] || v_id::text || p_suffix[i];
      v_full := notes_no_room(n, c, 0, octet_length(v_json), p_limits, p_holder, p_now[i]);
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

-- As before, and the state it replaces becomes a past revision (with p_limits[6] > 1).
CREATE OR REPLACE FUNCTION notes_update(
  p_notebook text, p_position bigint, p_written bigint, p_json text, p_id double precision,
  p_search text, p_now bigint, p_limits bigint[], p_holder text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  v_old text;
  v_modified bigint;
  v_count bigint;
  v_growth bigint;
  v_full text;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  SELECT json, modified, revisions INTO v_old, v_modified, v_count FROM notes
    WHERE notebook = p_notebook AND position = p_position AND written = p_written;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_growth := octet_length(p_json) - octet_length(v_old);
  v_full := notes_no_room(n, c, 0, v_growth, p_limits, p_holder, p_now);
  IF v_full IS NOT NULL THEN
    RAISE EXCEPTION '%', v_full USING ERRCODE = 'NS507';
  END IF;
  n.sequence := n.sequence + 1;
  IF p_limits[6] > 1 THEN
    INSERT INTO notes_revisions (notebook, position, sequence, at, change, json)
      VALUES (p_notebook, p_position, p_written, v_modified,
        CASE WHEN p_written = p_position THEN 'created' ELSE 'updated' END, v_old);
    v_count := v_count + 1;
    c.history_bytes := c.history_bytes + octet_length(v_old);
  END IF;
  IF v_count > 0 AND notes_trim_due(v_count, c.history_bytes, p_written, p_limits) THEN
    SELECT r_count, r_held INTO v_count, c.history_bytes
      FROM notes_trim_revisions(p_notebook, p_position, v_count, p_now, p_limits, c.history_bytes);
  END IF;
  UPDATE notes_notebooks SET sequence = n.sequence, bytes = n.bytes + v_growth
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET bytes = c.bytes + v_growth, history_bytes = c.history_bytes;
  UPDATE notes SET json = p_json, id = p_id, written = n.sequence, modified = p_now,
    search = p_search, revisions = v_count
    WHERE notebook = p_notebook AND position = p_position;
  PERFORM notes_record_change(p_notebook, n.sequence, 'updated', p_json, p_limits[5]);
  RETURN n.sequence;
END $$;

-- As before, and with a trash (p_limits[9] > 0) the note goes there, numbered by this delete,
-- with its revisions; without one its revisions go with it. The notebook's trash past its time
-- goes too.
DROP FUNCTION notes_delete(text, bigint, bigint, text, bigint);
CREATE FUNCTION notes_delete(
  p_notebook text, p_position bigint, p_written bigint, p_data text, p_now bigint,
  p_limits bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  d notes%ROWTYPE;
  v_bytes bigint;
  v_trashed bigint := 0;
  v_history bigint := 0;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  DELETE FROM notes WHERE notebook = p_notebook AND position = p_position AND written = p_written
    RETURNING * INTO d;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_bytes := octet_length(d.json);
  n.sequence := n.sequence + 1;
  IF p_limits[9] > 0 THEN
    INSERT INTO notes_trash
        (notebook, sequence, position, id, json, written, modified, search, revisions, deleted)
      VALUES (p_notebook, n.sequence, d.position, d.id, d.json, d.written, d.modified, d.search,
        d.revisions, p_now);
    v_trashed := 1;
  ELSE
    WITH gone AS (
      DELETE FROM notes_revisions WHERE notebook = p_notebook AND position = d.position
      RETURNING octet_length(json) AS bytes)
    SELECT coalesce(sum(bytes), 0) INTO v_history FROM gone;
  END IF;
  UPDATE notes_notebooks SET sequence = n.sequence, notes = n.notes - 1, bytes = n.bytes - v_bytes,
    trash_notes = n.trash_notes + v_trashed, trash_bytes = n.trash_bytes + v_trashed * v_bytes
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET notes = c.notes - 1, bytes = c.bytes - v_bytes,
    trash_notes = c.trash_notes + v_trashed, trash_bytes = c.trash_bytes + v_trashed * v_bytes,
    history_bytes = c.history_bytes - v_history;
  PERFORM notes_record_change(p_notebook, n.sequence, 'deleted', p_data, p_limits[5]);
  PERFORM notes_expire_trash(p_notebook, p_now, p_limits[9]);
  RETURN n.sequence;
END $$;

-- Puts the most recently deleted note with id p_id (still within its time) back at the end of the
-- list, with its content and revisions, as a new write (a 'created' change and revision). Answers
-- the note, or r_refusal 'absent' (no such note in the trash) or 'taken' (a live note has the id).
-- It needs no room: the trash counted toward the caps already.
CREATE FUNCTION notes_untrash(
  p_notebook text, p_id double precision, p_now bigint, p_limits bigint[])
RETURNS TABLE (r_json text, r_written bigint, r_modified bigint, r_refusal text)
LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  c notes_clock%ROWTYPE;
  t notes_trash%ROWTYPE;
  v_bytes bigint;
  v_count bigint;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  SELECT * INTO c FROM notes_clock FOR UPDATE;
  SELECT * INTO t FROM notes_trash
    WHERE notebook = p_notebook AND id = p_id AND deleted > p_now - p_limits[9]
    ORDER BY sequence DESC LIMIT 1;
  IF NOT FOUND THEN
    RETURN QUERY SELECT NULL::text, NULL::bigint, NULL::bigint, 'absent'::text;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM notes WHERE id = p_id AND notebook = p_notebook) THEN
    RETURN QUERY SELECT NULL::text, NULL::bigint, NULL::bigint, 'taken'::text;
    RETURN;
  END IF;
  DELETE FROM notes_trash WHERE notebook = p_notebook AND sequence = t.sequence;
  v_bytes := octet_length(t.json);
  n.sequence := n.sequence + 1;
  v_count := t.revisions;
  IF v_count > 0 THEN
    UPDATE notes_revisions SET position = n.sequence
      WHERE notebook = p_notebook AND position = t.position;
  END IF;
  IF p_limits[6] > 1 THEN
    INSERT INTO notes_revisions (notebook, position, sequence, at, change, json)
      VALUES (p_notebook, n.sequence, t.written, t.modified,
        CASE WHEN t.written = t.position THEN 'created' ELSE 'updated' END, t.json);
    v_count := v_count + 1;
    c.history_bytes := c.history_bytes + v_bytes;
  END IF;
  IF v_count > 0 AND notes_trim_due(v_count, c.history_bytes, t.written, p_limits) THEN
    SELECT r_count, r_held INTO v_count, c.history_bytes
      FROM notes_trim_revisions(p_notebook, n.sequence, v_count, p_now, p_limits, c.history_bytes);
  END IF;
  INSERT INTO notes (notebook, position, id, json, written, modified, search, revisions)
    VALUES (p_notebook, n.sequence, t.id, t.json, n.sequence, p_now, t.search, v_count);
  UPDATE notes_notebooks SET sequence = n.sequence, notes = n.notes + 1, bytes = n.bytes + v_bytes,
    trash_notes = n.trash_notes - 1, trash_bytes = n.trash_bytes - v_bytes
    WHERE notebook = p_notebook;
  UPDATE notes_clock SET notes = c.notes + 1, bytes = c.bytes + v_bytes,
    trash_notes = c.trash_notes - 1, trash_bytes = c.trash_bytes - v_bytes,
    history_bytes = c.history_bytes;
  PERFORM notes_record_change(p_notebook, n.sequence, 'created', t.json, p_limits[5]);
  PERFORM notes_expire_trash(p_notebook, p_now, p_limits[9]);
  RETURN QUERY SELECT t.json, n.sequence, p_now, NULL::text;
END $$;

-- Removes from the trash for good the most recently deleted note with id p_id (p_id NULL: every
-- one) still within its time, and every one past it; answers how many went within their time.
-- No change: the notebook's version stays.
CREATE FUNCTION notes_purge(p_notebook text, p_id double precision, p_now bigint, p_trash_ms bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_sequences bigint[];
BEGIN
  PERFORM 1 FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  IF p_id IS NULL THEN
    v_sequences := ARRAY(SELECT sequence FROM notes_trash
      WHERE notebook = p_notebook AND deleted > p_now - p_trash_ms);
  ELSE
    v_sequences := ARRAY(SELECT sequence FROM notes_trash
      WHERE notebook = p_notebook AND id = p_id AND deleted > p_now - p_trash_ms
      ORDER BY sequence DESC LIMIT 1);
  END IF;
  PERFORM notes_remove_trash(p_notebook, v_sequences);
  PERFORM notes_expire_trash(p_notebook, p_now, p_trash_ms);
  RETURN coalesce(array_length(v_sequences, 1), 0);
END $$;

-- As before, with the notebook's revisions and trash, and their room given back.
CREATE OR REPLACE FUNCTION notes_drop_notebook(p_notebook text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  n notes_notebooks%ROWTYPE;
  v_history bigint;
BEGIN
  SELECT * INTO n FROM notes_notebooks WHERE notebook = p_notebook FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  PERFORM notes_remove_trash(p_notebook, ARRAY(SELECT sequence FROM notes_trash
    WHERE notebook = p_notebook));
  WITH gone AS (
    DELETE FROM notes_revisions WHERE notebook = p_notebook RETURNING octet_length(json) AS bytes)
  SELECT coalesce(sum(bytes), 0) INTO v_history FROM gone;
  UPDATE notes_clock SET notes = notes - n.notes, bytes = bytes - n.bytes,
    history_bytes = history_bytes - v_history;
  DELETE FROM notes WHERE notebook = p_notebook;
  DELETE FROM notes_changes WHERE notebook = p_notebook;
  DELETE FROM notes_idempotency WHERE notebook = p_notebook;
  DELETE FROM notes_notebooks WHERE notebook = p_notebook;
END $$;
`,
}
