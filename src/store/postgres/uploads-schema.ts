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
