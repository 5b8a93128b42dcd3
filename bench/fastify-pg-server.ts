/**
 * The straightforward Fastify + `pg` implementation of the API, the reference of
 * `npm run bench -- --store postgres`: one `pg.Pool` (DATABASE_POOL_SIZE, default 10), one query
 * per request, each note a `jsonb` row (the column type a tutorial reaches for: pg hands it back
 * as an object, and `reply.send` runs JSON.stringify per answer). Ids come from a
 * one-row clock updated in the same statement as the insert, so they are unique and time-based
 * across instances. DATABASE_URL and PORT from the environment; 127.0.0.1.
 */
import Fastify from 'fastify'
import pg from 'pg'

interface IdParams {
  id: string
}

const url = process.env.DATABASE_URL
if (url === undefined) throw new Error('DATABASE_URL is required')
const pool = new pg.Pool({
  connectionString: url,
  max: Number(process.env.DATABASE_POOL_SIZE ?? 10),
})

// `id` mirrors data->'id' when it is an integer (NULL otherwise), for the index; `seq` is the
// list order. The advisory lock keeps instances that start together from racing on the DDL.
const schema = await pool.connect()
try {
  await schema.query('BEGIN')
  await schema.query('SELECT pg_advisory_xact_lock(1717)')
  await schema.query(`
    CREATE TABLE IF NOT EXISTS notes (seq bigserial PRIMARY KEY, id bigint, data jsonb NOT NULL);
    CREATE INDEX IF NOT EXISTS notes_id ON notes (id, seq);
    CREATE TABLE IF NOT EXISTS notes_clock (
      one boolean PRIMARY KEY DEFAULT true CHECK (one), last_id bigint NOT NULL);
    INSERT INTO notes_clock VALUES (true, 0) ON CONFLICT DO NOTHING;`)
  await schema.query('COMMIT')
} finally {
  schema.release()
}

// id = max(now, last id + 1), stepping over ids that a PATCH gave to a stored note;
// the UPDATE locks the clock row, so concurrent creates on any instance take turns. (The series
// is in the select list, where it is produced lazily; in FROM it would be materialized whole.)
const CREATE = `
  WITH clock AS (
    UPDATE notes_clock SET last_id = (
      SELECT v FROM (SELECT generate_series(GREATEST(notes_clock.last_id + 1, $1::bigint),
                                            GREATEST(notes_clock.last_id + 1, $1::bigint) + 1000000) v) s
      WHERE NOT EXISTS (SELECT 1 FROM notes WHERE notes.id = v) LIMIT 1)
    RETURNING last_id)
  INSERT INTO notes (id, data)
  SELECT last_id, $2::jsonb || jsonb_build_object('id', last_id) FROM clock
  RETURNING data`
/** The first note in list order with that id. */
const FIRST = 'SELECT seq FROM notes WHERE id = $1 ORDER BY seq LIMIT 1'

/** '007' -> 7; anything but a decimal integer -> undefined. */
function idOf(segment: string): number | undefined {
  if (!/^-?[0-9]+$/.test(segment)) return undefined
  const id = Number(segment)
  return Number.isSafeInteger(id) ? id : undefined
}

function isObject(body: unknown): body is Record<string, unknown> {
  return typeof body === 'object' && body !== null && !Array.isArray(body)
}

const app = Fastify()

app.post('/api/note', async (request, reply) => {
  const body = request.body ?? {}
  if (!isObject(body)) return reply.code(400).send({ error: 'the body must be a JSON object' })
  const { rows } = await pool.query(CREATE, [Date.now(), body])
  return reply.send({ data: rows[0].data })
})

app.get('/api/note', async (_request, reply) => {
  const { rows } = await pool.query('SELECT data FROM notes ORDER BY seq')
  return reply.send({ data: rows.map((row) => row.data) })
})

app.get<{ Params: IdParams }>('/api/note/:id', async (request, reply) => {
  const id = idOf(request.params.id)
  const { rows } =
    id === undefined
      ? { rows: [] }
      : await pool.query('SELECT data FROM notes WHERE id = $1 ORDER BY seq LIMIT 1', [id])
  if (rows[0] === undefined) return reply.code(404).send()
  return reply.send({ data: rows[0].data })
})

app.patch<{ Params: IdParams }>('/api/note/:id', async (request, reply) => {
  const id = idOf(request.params.id)
  const body = request.body ?? {}
  if (!isObject(body)) return reply.code(400).send({ error: 'the body must be a JSON object' })
  if (id === undefined) return reply.code(404).send()
  const changesId = Object.hasOwn(body, 'id')
  const newId = Number.isSafeInteger(body.id) ? body.id : null
  const { rows } = await pool.query(
    `UPDATE notes SET data = data || $2::jsonb, id = CASE WHEN $3::boolean THEN $4::bigint ELSE id END
     WHERE seq = (${FIRST}) RETURNING data`,
    [id, body, changesId, newId],
  )
  if (rows[0] === undefined) return reply.code(404).send()
  return reply.send({ data: rows[0].data })
})

app.delete<{ Params: IdParams }>('/api/note/:id', async (request, reply) => {
  const id = idOf(request.params.id)
  const { rowCount } =
    id === undefined
      ? { rowCount: 0 }
      : await pool.query(`DELETE FROM notes WHERE seq = (${FIRST})`, [id])
  if (rowCount === 0) return reply.code(404).send()
  return reply.send({ data: request.params.id })
})

await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' })
process.once('SIGTERM', () => {
  void app.close().then(() => pool.end())
})
