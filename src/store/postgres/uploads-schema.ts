/**
 * Migration 8 (MIGRATIONS, migrations.ts): uploads that resume (tus), in the database, so that an
 * upload begun on one instance goes on on any other, and what it acknowledged survives a crash.
 *
 * - notes_resumable_uploads: one row per upload, keyed by its id: what it is (notebook, length,
 *   type, metadata, created), `received` (its offset: the bytes of its committed chunks), `parts`
 *   (how many chunks it has), `touched` (its last bytes, ms since 1970, as the service's clock
 *   says: its lifetime runs from there) and, once its last byte made it a file, `file`.
 * - Its bytes are a blob of notes_file_chunks, as a file's are, numbered from the same sequence as
 *   the files' pending blobs (so no blob is two things), but held by the upload's row, never by
 *   notes_file_uploads: the sweep of pending blobs untouched for an hour never takes an upload's,
 *   which lives 24 h after its last byte. Its chunks are of any size up to the files' 256 KiB
 *   (a part ends where a request's body ends), read back in the order of `parts`.
 * - notes_append_upload writes one chunk and moves the offset past it in one statement, after it
 *   locks the upload's row and finds it holding the offset the chunk goes at: the offset never
 *   counts a byte that is not committed, and two requests (on any instances) never interleave.
 * - A finished upload (notes_finish_upload) and a removed one (notes_remove_upload) let their
 *   blob go as garbage (notes_file_garbage), collected as a deleted file's.
 */
export const UPLOADS_MIGRATION: { version: number; sql: string } = {
  version: 8,
  sql: `
CREATE TABLE notes_resumable_uploads (
  id text PRIMARY KEY,
  notebook text NOT NULL,
  length bigint NOT NULL,
  type text NOT NULL,
  metadata text NOT NULL,
  created bigint NOT NULL,
  touched bigint NOT NULL,
  received bigint NOT NULL DEFAULT 0 CHECK (received <= length),
  parts integer NOT NULL DEFAULT 0,
  blob bigint UNIQUE
    DEFAULT nextval(pg_get_serial_sequence('notes_file_uploads', 'blob')::regclass),
  file text
);

-- Appends p_data to upload p_id as its next chunk, if it holds p_at bytes now and is not
-- finished; answers its new offset, or NULL (nothing written) when it holds another offset,
-- is finished, or is gone.
CREATE FUNCTION notes_append_upload(p_id text, p_at bigint, p_data bytea, p_touched bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
BEGIN
  SELECT * INTO u FROM notes_resumable_uploads WHERE id = p_id FOR UPDATE;
  IF NOT FOUND OR u.blob IS NULL OR u.received <> p_at THEN
    RETURN NULL;
  END IF;
  INSERT INTO notes_file_chunks (blob, part, data) VALUES (u.blob, u.parts, p_data);
  UPDATE notes_resumable_uploads
    SET received = u.received + length(p_data), parts = u.parts + 1, touched = p_touched
    WHERE id = p_id;
  RETURN u.received + length(p_data);
END $$;

-- Marks upload p_id as become file p_file; its chunks are garbage.
CREATE FUNCTION notes_finish_upload(p_id text, p_file text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
BEGIN
  SELECT * INTO u FROM notes_resumable_uploads WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE notes_resumable_uploads SET file = p_file, blob = NULL WHERE id = p_id;
  IF u.blob IS NOT NULL THEN
    INSERT INTO notes_file_garbage (blob) VALUES (u.blob) ON CONFLICT DO NOTHING;
  END IF;
END $$;

-- Removes upload p_id (termination, expiry); its chunks are garbage.
CREATE FUNCTION notes_remove_upload(p_id text)
RETURNS void LANGUAGE sql AS $$
  WITH gone AS (DELETE FROM notes_resumable_uploads WHERE id = p_id RETURNING blob)
  INSERT INTO notes_file_garbage (blob)
    SELECT blob FROM gone WHERE blob IS NOT NULL ON CONFLICT DO NOTHING;
$$;
`,
}

/**
 * Migration 10: the caps of files count unfinished uploads exactly, across instances.
 *
 * - `reserved` in notes_file_notebooks and notes_file_clock: the bytes the notebook's (the
 *   service's) unfinished uploads hold, beside `bytes` of files. notes_append_upload counts each
 *   chunk there after it checks the caps under both rows, so two uploads growing at once (on any
 *   instances) never pass a cap together; a file kept (notes_keep_file) is checked against files
 *   and uploads together. Locks are taken upload row, notebook row, clock row, in that order,
 *   everywhere (no deadlock).
 * - notes_keep_file takes the upload whose bytes the file is (p_upload, or NULL): those bytes are
 *   the file's own, not counted twice, and in the same transaction the upload is marked as become
 *   the file and its bytes stop counting as reserved. When the upload's chunks are all of the
 *   files' chunk size (but the last), the file takes over the upload's blob instead of a copy.
 * - A finished, removed or dropped upload gives back what it reserved; a notebook's removal keeps
 *   its counts row while uploads of it still reserve bytes.
 * - notes_files.touched: when a file's bytes were last put again (NULL until then), written by
 *   notes_keep_file when the notebook holds the bytes already (p_touched), so that the sweep of
 *   files no note refers to gives a file uploaded again its grace anew, on every instance.
 */
export const UPLOAD_ROOM_MIGRATION: { version: number; sql: string } = {
  version: 10,
  sql: `
ALTER TABLE notes_file_notebooks ADD COLUMN reserved bigint NOT NULL DEFAULT 0;
ALTER TABLE notes_file_clock ADD COLUMN reserved bigint NOT NULL DEFAULT 0;
ALTER TABLE notes_files ADD COLUMN touched bigint;
INSERT INTO notes_file_notebooks AS t (notebook, reserved)
  SELECT notebook, sum(received) FROM notes_resumable_uploads WHERE file IS NULL GROUP BY notebook
  ON CONFLICT (notebook) DO UPDATE SET reserved = excluded.reserved;
UPDATE notes_file_clock SET reserved =
  (SELECT coalesce(sum(received), 0) FROM notes_resumable_uploads WHERE file IS NULL);

-- Gives back p_bytes that unfinished uploads of p_notebook reserved (locks its row, then the
-- clock's).
CREATE FUNCTION notes_unreserve(p_notebook text, p_bytes bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_bytes = 0 THEN
    RETURN;
  END IF;
  UPDATE notes_file_notebooks SET reserved = reserved - p_bytes WHERE notebook = p_notebook;
  UPDATE notes_file_clock SET reserved = reserved - p_bytes;
END $$;

-- As before, and the chunk's bytes reserved under the caps p_max (the notebook's, then the
-- service's): past one, SQLSTATE NSF07 (nothing written), its detail the bytes that notebook and
-- service hold in files and uploads.
DROP FUNCTION notes_append_upload(text, bigint, bytea, bigint);
CREATE FUNCTION notes_append_upload(
  p_id text, p_at bigint, p_data bytea, p_touched bigint, p_max bigint[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
  n notes_file_notebooks%ROWTYPE;
  c notes_file_clock%ROWTYPE;
  v_more bigint := length(p_data);
BEGIN
  SELECT * INTO u FROM notes_resumable_uploads WHERE id = p_id FOR UPDATE;
  IF NOT FOUND OR u.blob IS NULL OR u.received <> p_at THEN
    RETURN NULL;
  END IF;
  -- The chunk first: the counts rows are locked for the few updates after it, not its write.
  INSERT INTO notes_file_chunks (blob, part, data) VALUES (u.blob, u.parts, p_data);
  INSERT INTO notes_file_notebooks AS t (notebook) VALUES (u.notebook)
    ON CONFLICT (notebook) DO UPDATE SET files = t.files
    RETURNING * INTO n;
  SELECT * INTO c FROM notes_file_clock FOR UPDATE;
  IF n.bytes + n.reserved + v_more > p_max[1] OR c.bytes + c.reserved + v_more > p_max[2] THEN
    RAISE EXCEPTION 'no room for % more bytes of files', v_more USING ERRCODE = 'NSF07',
      DETAIL = format('%s %s', n.bytes + n.reserved, c.bytes + c.reserved);
  END IF;
  UPDATE notes_resumable_uploads
    SET received = u.received + v_more, parts = u.parts + 1, touched = p_touched
    WHERE id = p_id;
  UPDATE notes_file_notebooks SET reserved = n.reserved + v_more WHERE notebook = u.notebook;
  UPDATE notes_file_clock SET reserved = c.reserved + v_more;
  RETURN u.received + v_more;
END $$;

CREATE OR REPLACE FUNCTION notes_finish_upload(p_id text, p_file text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
BEGIN
  SELECT * INTO u FROM notes_resumable_uploads WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE notes_resumable_uploads SET file = p_file, blob = NULL WHERE id = p_id;
  IF u.blob IS NOT NULL THEN
    INSERT INTO notes_file_garbage (blob) VALUES (u.blob) ON CONFLICT DO NOTHING;
  END IF;
  IF u.file IS NULL THEN
    PERFORM notes_unreserve(u.notebook, u.received);
  END IF;
END $$;

DROP FUNCTION notes_remove_upload(text);
CREATE FUNCTION notes_remove_upload(p_id text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
BEGIN
  DELETE FROM notes_resumable_uploads WHERE id = p_id RETURNING * INTO u;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF u.blob IS NOT NULL THEN
    INSERT INTO notes_file_garbage (blob) VALUES (u.blob) ON CONFLICT DO NOTHING;
  END IF;
  IF u.file IS NULL THEN
    PERFORM notes_unreserve(u.notebook, u.received);
  END IF;
END $$;

-- Removes every upload of p_notebook (its removal); their chunks are garbage.
CREATE FUNCTION notes_drop_uploads(p_notebook text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_reserved bigint;
BEGIN
  WITH gone AS (
    DELETE FROM notes_resumable_uploads WHERE notebook = p_notebook RETURNING blob, received, file),
  garbage AS (
    INSERT INTO notes_file_garbage (blob)
      SELECT blob FROM gone WHERE blob IS NOT NULL ON CONFLICT DO NOTHING)
  SELECT coalesce(sum(received) FILTER (WHERE file IS NULL), 0) INTO v_reserved FROM gone;
  PERFORM notes_unreserve(p_notebook, v_reserved);
END $$;

CREATE OR REPLACE FUNCTION notes_drop_files(p_notebook text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  n notes_file_notebooks%ROWTYPE;
BEGIN
  SELECT * INTO n FROM notes_file_notebooks WHERE notebook = p_notebook FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  INSERT INTO notes_file_garbage (blob)
    SELECT blob FROM notes_files WHERE notebook = p_notebook ON CONFLICT DO NOTHING;
  DELETE FROM notes_files WHERE notebook = p_notebook;
  UPDATE notes_file_clock SET files = files - n.files, bytes = bytes - n.bytes;
  IF n.reserved = 0 THEN
    DELETE FROM notes_file_notebooks WHERE notebook = p_notebook;
  ELSE
    UPDATE notes_file_notebooks SET files = 0, bytes = 0 WHERE notebook = p_notebook;
  END IF;
END $$;

-- As before, checked against files and unfinished uploads together; p_upload (or NULL) is the
-- upload whose bytes these are, kept as this file in the same transaction: p_blob is then either
-- a pending blob of their copy or the upload's own blob, which the file takes over. Bytes the notebook
-- holds already touch that file (p_touched), answered with r_kept false: the caller commits
-- when r_sequence is not NULL.
DROP FUNCTION notes_keep_file(text, text, bigint, text, bigint, bigint, integer, bigint[]);
CREATE FUNCTION notes_keep_file(
  p_notebook text, p_id text, p_size bigint, p_type text, p_created bigint,
  p_blob bigint, p_chunk integer, p_max bigint[], p_upload text, p_touched bigint)
RETURNS TABLE (r_kept boolean, r_type text, r_created bigint, r_sequence bigint,
  r_touched bigint, r_notebook_bytes bigint, r_service_bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
  u notes_resumable_uploads%ROWTYPE;
  n notes_file_notebooks%ROWTYPE;
  c notes_file_clock%ROWTYPE;
  f notes_files%ROWTYPE;
  v_own bigint := 0;
  v_pending boolean := false;
BEGIN
  IF p_upload IS NOT NULL THEN
    SELECT * INTO u FROM notes_resumable_uploads
      WHERE id = p_upload AND notebook = p_notebook FOR UPDATE;
    v_pending := FOUND AND u.file IS NULL;
    IF v_pending THEN
      v_own := u.received;
    END IF;
  END IF;
  INSERT INTO notes_file_notebooks AS t (notebook) VALUES (p_notebook)
    ON CONFLICT (notebook) DO UPDATE SET files = t.files
    RETURNING * INTO n;
  UPDATE notes_files SET touched = p_touched WHERE notebook = p_notebook AND id = p_id
    RETURNING * INTO f;
  IF FOUND THEN
    RETURN QUERY SELECT false, f.type, f.created, f.sequence, f.touched, n.bytes, NULL::bigint;
    RETURN;
  END IF;
  SELECT * INTO c FROM notes_file_clock FOR UPDATE;
  IF n.bytes + n.reserved - v_own + p_size > p_max[1]
      OR c.bytes + c.reserved - v_own + p_size > p_max[2] THEN
    RETURN QUERY SELECT false, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint,
      n.bytes + n.reserved - v_own, c.bytes + c.reserved - v_own;
    RETURN;
  END IF;
  IF v_pending AND u.blob = p_blob THEN
    -- The upload's own chunks, of the file's chunk size, become the file's: nothing copied.
    UPDATE notes_resumable_uploads SET file = p_id, blob = NULL WHERE id = p_upload;
  ELSE
    DELETE FROM notes_file_uploads WHERE blob = p_blob;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'upload % was removed before it was kept', p_blob;
    END IF;
    IF v_pending THEN
      UPDATE notes_resumable_uploads SET file = p_id, blob = NULL WHERE id = p_upload;
      IF u.blob IS NOT NULL THEN
        INSERT INTO notes_file_garbage (blob) VALUES (u.blob) ON CONFLICT DO NOTHING;
      END IF;
    END IF;
  END IF;
  INSERT INTO notes_files (notebook, id, size, type, created, blob, chunk)
    VALUES (p_notebook, p_id, p_size, p_type, p_created, p_blob, p_chunk)
    RETURNING sequence INTO f.sequence;
  UPDATE notes_file_notebooks
    SET files = n.files + 1, bytes = n.bytes + p_size, reserved = n.reserved - v_own
    WHERE notebook = p_notebook;
  UPDATE notes_file_clock
    SET files = c.files + 1, bytes = c.bytes + p_size, reserved = c.reserved - v_own;
  RETURN QUERY SELECT true, p_type, p_created, f.sequence, NULL::bigint,
    n.bytes + p_size, c.bytes + p_size;
END $$;
`,
}
