import assert from 'node:assert/strict'
import { after, afterEach, describe, it } from 'node:test'
import pg from 'pg'
import { PostgresNotebooks } from '../../../src/store/postgres/notebooks.js'
import { migrate } from '../../../src/store/postgres/schema.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { type NoteStore, StoreFullError } from '../../../src/store/types.js'
import { type ArchiveStoreOptions, runArchiveContract } from '../../support/archive.contract.js'
import { runNotebooksContract } from '../../support/notebooks.contract.js'
import { runNotebooksModelProperty } from '../../support/notebooks-model.property.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { pooledStore } from '../../support/schema-pool.js'
import { type ContractStoreOptions, runStoreContract } from '../../support/store.contract.js'

const url = postgresAvailable('PostgresNotebooks') ? await testDatabase() : ''
if (url !== '') {
  const opened: { close: () => Promise<void> }[] = []
  // Each case's stores are closed after it: kept to the end, the cases' connections (a pool, the
  // pipelined reads, a listener each) passed the cluster's max_connections, refusing the last ones.
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((one) => one.close()))
  })
  after(async () => {
    await Promise.all(opened.map((one) => one.close()))
  })
  let schemas = 0
  type Options = Omit<ConstructorParameters<typeof PostgresNotebooks>[0], 'url' | 'schema'>
  // Notebooks that start empty, on a schema of the pool (schema-pool.ts), given back on close;
  // `made` gets the schema.
  const pooled = (options: Options, made?: (schema: string) => void) =>
    pooledStore(url, undefined, (schema) => {
      made?.(schema)
      return new PostgresNotebooks({ url, schema, poolSize: 2, ...options })
    })
  const make = (options: Options, made?: (schema: string) => void) => {
    const notebooks = pooled(options, made)
    opened.push(notebooks)
    return notebooks
  }

  runNotebooksContract('PostgresNotebooks', (options) =>
    make({ maxNotes: 1 << 24, maxBytes: 1 << 24, ...options }),
  )

  describe('PostgresNotebooks against three models', () => {
    runNotebooksModelProperty((options) => pooled(options), {
      numRuns: 40,
      close: (notebooks) => (notebooks as PostgresNotebooks).close(),
    })
  })

  runStoreContract(
    'a notebook of PostgresNotebooks, while another notebook holds notes',
    (o: ContractStoreOptions) => {
      const maxNotes = o.maxNotes ?? 1_000_000
      const maxBytes = o.maxBytes ?? 1 << 28
      const clock = o.now ?? Date.now
      let filling = true
      let schema = ''
      const notebooks = make(
        {
          maxNotes: 2 * maxNotes,
          maxBytes: 2 * maxBytes,
          maxNotesPerNotebook: maxNotes,
          maxBytesPerNotebook: maxBytes,
          now: () => (filling ? -1000 : clock()),
          ...(o.historyLimit === undefined ? {} : { historyLimit: o.historyLimit }),
        },
        (made) => {
          schema = made
        },
      )
      const filled = fillOther(notebooks.notebook('b'), schema).then(() => {
        filling = false
      })
      return afterwards(filled, notebooks.notebook('a'))
    },
  )

  // A notebook beside another that holds notes and history: the bounds are its own, the history's
  // bytes the service's.
  runArchiveContract(
    'a notebook of PostgresNotebooks, while another notebook holds notes and history',
    async (o: ArchiveStoreOptions) => {
      const maxNotes = o.maxNotes ?? 1_000_000
      const maxBytes = o.maxBytes ?? 1 << 28
      const notebooks = make({
        maxNotes: 2 * maxNotes,
        maxBytes: 2 * maxBytes,
        maxNotesPerNotebook: maxNotes,
        maxBytesPerNotebook: maxBytes,
        ...(o.now === undefined ? {} : { now: o.now }),
        archive: o.archive,
      })
      const other = notebooks.notebook('other')
      const note = await other.create({ other: true })
      if (o.archive?.maxHistoryBytes === undefined) {
        await other.update((JSON.parse(note.json) as { id: number }).id, { edited: 1 })
      }
      return notebooks.notebook('mine')
    },
  )

  describe('PostgresNotebooks on a database of the store before notebooks', () => {
    it('keeps every note, version, change and key of a store made before notebooks in the shared notebook', async () => {
      const schema = `upgraded_${++schemas}`
      const client = new pg.Client({
        connectionString: url,
        options: `-c search_path=${schema},public`,
      })
      await client.connect()
      try {
        // The schema as the release before notebooks made it (migrations 1 and 2), written by
        // that release's functions: two creates (one under a key), an update, a delete.
        await migrate(client, schema, 'olde', 2)
        await client.query(
          'SELECT * FROM notes_create_many(ARRAY[1000, 1000]::bigint[], ARRAY[\'{"t":"a","id":\', \'{"t":"b","id":\'], ARRAY[\'}\', \'}\'], ARRAY[\'a\', \'b\'], 100, 100000, 100)',
        )
        await client.query(
          "SELECT * FROM notes_create(1000, '{\"t\":\"c\",\"id\":', '}', 'c', 100, 100000, 100, 'key-1', 'body-1', 999999, 100)",
        )
        await client.query(
          'SELECT notes_update(1, 1, \'{"t":"A","id":1000}\', 1000, \'a\', 2000, 100000, 100)',
        )
        await client.query('SELECT notes_delete(2, 2, \'{"id":1001}\', 100)')
      } finally {
        await client.end()
      }
      // A schema of its own, made by an older release: not the pool's.
      const notebooks = new PostgresNotebooks({
        url,
        schema,
        poolSize: 2,
        maxNotes: 100,
        maxBytes: 100_000,
        now: () => 3000,
      })
      opened.push(notebooks)
      const shared = notebooks.notebook('shared')
      assert.deepEqual(await shared.list(), {
        json: '[{"t":"A","id":1000},{"t":"c","id":1002}]',
        version: 'olde.5',
        count: 2,
      })
      assert.deepEqual(await shared.get(1000), {
        json: '{"t":"A","id":1000}',
        etag: '"olde.4"',
        modified: 2000,
      })
      const changes = await shared.changesSince('olde.0', 10)
      assert.deepEqual(
        changes?.map(({ type, version }) => [type, version]),
        [
          ['created', 'olde.1'],
          ['created', 'olde.2'],
          ['created', 'olde.3'],
          ['updated', 'olde.4'],
          ['deleted', 'olde.5'],
        ],
      )
      const replay = await shared.createOnce('key-1', 'body-1', { t: 'c' })
      assert.deepEqual([replay.replayed, replay.note.json], [true, '{"t":"c","id":1002}'])
      assert.deepEqual(await notebooks.stats(), {
        notes: 2,
        bytes: 38,
        maxNotes: 100,
        maxBytes: 100_000,
      })
      // A user's notebook starts empty, and its first id follows the old ones.
      const user = notebooks.notebook('user:alice')
      assert.equal((await user.list()).json, '[]')
      assert.equal(await user.get(1000), undefined)
      assert.equal((await user.create({})).json, '{"id":3000}')
      assert.equal((await shared.create({})).json, '{"id":3001}')
      assert.equal(await shared.version(), 'olde.6')
      // A store of its own on the same schema is the shared notebook.
      const alone = new PostgresNoteStore({
        url,
        schema,
        poolSize: 1,
        maxNotes: 100,
        maxBytes: 100_000,
      })
      opened.push(alone)
      assert.equal(
        (await alone.list()).json,
        '[{"t":"A","id":1000},{"t":"c","id":1002},{"id":3001}]',
      )
    })
  })
}

/**
 * Notes for notebook 'b' that would show in 'a' if anything leaked: matches for the contract's
 * searches ('bread'), an id patched to the string '7', and the contract's idempotency keys with
 * other bodies (fewer when the caps are small). Their ids are then moved below every id the
 * contract expects 'a' to give, and the service's clock set back, as if they had been made before
 * it started: in memory they are made at a clock of -1000; here ids start above the last one.
 */
async function fillOther(other: NoteStore, schema: string): Promise<void> {
  const writes = [
    () => other.create({ title: 'Buy BREAD', t: 'bread', q: 'say "bread"\n' }),
    () => other.createOnce('k1', 'other body', { bread: 'brEad crumbs' }),
    () => other.createOnce('k-1', 'other body', { deep: [{ x: ['wholebread'] }] }),
    () => other.create({ t: 'ſtraße 100%', id: 'mine' }),
  ]
  const made: number[] = []
  for (const write of writes) {
    try {
      const note = await write()
      made.push((JSON.parse('note' in note ? note.note.json : note.json) as { id: number }).id)
    } catch (error) {
      if (!(error instanceof StoreFullError)) throw error
    }
  }
  for (const [n, id] of made.entries()) await other.update(id, { id: n === 0 ? '7' : -1000 + n })
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`UPDATE ${schema}.notes_clock SET last_id = 0`)
  } finally {
    await client.end()
  }
}

/** `store`, each of whose operations waits for `ready` first (subscribe does not need to). */
function afterwards(ready: Promise<void>, store: NoteStore): NoteStore {
  const wait =
    <A extends unknown[], R>(operation: (...args: A) => R) =>
    async (...args: A): Promise<Awaited<R>> => {
      await ready
      return await operation.apply(store, args)
    }
  return {
    create: wait(store.create),
    createOnce: wait(store.createOnce),
    list: wait(store.list),
    page: wait(store.page),
    exportNotes: wait(store.exportNotes),
    get: wait(store.get),
    update: wait(store.update),
    delete: wait(store.delete),
    batch: wait(store.batch),
    version: wait(store.version),
    changesSince: wait(store.changesSince),
    stats: wait(store.stats),
    revisions: wait(store.revisions),
    revision: wait(store.revision),
    trash: wait(store.trash),
    untrash: wait(store.untrash),
    purge: wait(store.purge),
    emptyTrash: wait(store.emptyTrash),
    subscribe: (listener) => store.subscribe(listener),
  }
}
