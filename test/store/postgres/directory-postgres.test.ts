import assert from 'node:assert/strict'
import { after, afterEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import {
  type AccessChange,
  isRefusal,
  notebookStore,
  type Refusal,
} from '../../../src/store/directory.js'
import { PostgresNotebooks } from '../../../src/store/postgres/notebooks.js'
import { migrate, quoteIdent } from '../../../src/store/postgres/schema.js'
import { AccessLostError, type Notebooks } from '../../../src/store/types.js'
import {
  type ContractDirectoryOptions,
  runDirectoryContract,
} from '../../support/directory.contract.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { pooledStore } from '../../support/schema-pool.js'
import { waitUntil } from '../../support/store.contract.js'

function ok<T>(value: T | Refusal): T {
  if (isRefusal(value)) assert.fail(`refused: ${JSON.stringify(value)}`)
  return value as T
}

const url = postgresAvailable('PostgresNotebooks: the directory') ? await testDatabase() : ''
if (url !== '') {
  const opened: PostgresNotebooks[] = []
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((one) => one.close()))
  })
  after(async () => {
    await Promise.all(opened.map((one) => one.close()))
  })
  /** Each first instance's schema and options, and the other instances opened on it. */
  const instances = new Map<
    Notebooks,
    { schema: string; options: ContractDirectoryOptions; others: PostgresNotebooks[] }
  >()
  const optionsOf = (schema: string, options: ContractDirectoryOptions) => ({
    url,
    schema,
    poolSize: 2,
    maxNotes: 1 << 20,
    maxBytes: 1 << 24,
    ...options,
  })

  // The first instance on a schema of the pool; closing it closes the others on that schema
  // first, so that the schema goes back to the pool once nothing uses it.
  const make = (options: ContractDirectoryOptions = {}) => {
    let schema = ''
    const first = pooledStore(url, undefined, (made) => {
      schema = made
      return new PostgresNotebooks(optionsOf(made, options))
    })
    const others: PostgresNotebooks[] = []
    const close = first.close.bind(first)
    first.close = async () => {
      await Promise.all(others.splice(0).map((other) => other.close()))
      await close()
    }
    instances.set(first, { schema, options, others })
    opened.push(first)
    return first
  }
  /** Another instance of the service on the same database (schema) as `notebooks`. */
  const reopen = (notebooks: Notebooks) => {
    const { schema, options, others } = instances.get(notebooks) as {
      schema: string
      options: ContractDirectoryOptions
      others: PostgresNotebooks[]
    }
    const again = new PostgresNotebooks(optionsOf(schema, options))
    others.push(again)
    return again
  }

  runDirectoryContract('PostgresNotebooks', make, reopen)

  /**
   * One statement on `notebooks`' schema behind its directory's back: what no act does (a member
   * row gone with no change of access logged), so that a test tells a kept membership from a read.
   */
  const behindTheBack = async (notebooks: Notebooks, sql: string, values: unknown[] = []) => {
    const { schema } = instances.get(notebooks) as { schema: string }
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      await client.query(`SET search_path TO ${quoteIdent(schema)}`)
      await client.query(sql, values)
    } finally {
      await client.end()
    }
  }
  const dropRow = (notebooks: Notebooks, id: string, user: string) =>
    behindTheBack(notebooks, 'DELETE FROM notes_members WHERE notebook = $1 AND sub = $2', [
      id,
      user,
    ])
  /** Resolves once `notebooks`' directory has heard `count` more changes of access. */
  /** Subscribes, and resolves once every change of access committed from now on will be heard. */
  const hearing = async (notebooks: Notebooks) => {
    const heard: AccessChange[] = []
    const stop = notebooks.directory.subscribe((change) => heard.push(change))
    await notebooks.directory.caughtUp?.()
    return {
      until: async (count: number) => {
        await waitUntil(() => heard.length >= count)
      },
      stop,
    }
  }

  describe('PostgresNotebooks: the memberships an instance keeps', () => {
    it('answers from a membership it read while the log of changes of access has not moved, and reads it again once it has', async () => {
      const a = make()
      const nb = ok(await a.directory.create('ann', 'Kept'))
      ok(await a.directory.setRole('ann', nb.id, 'bob', 'editor'))
      const since = await a.notebook(notebookStore(nb.id)).version()
      const editor = { id: nb.id, store: notebookStore(nb.id), role: 'editor', since }
      assert.deepEqual(await a.directory.access('bob', nb.id), editor)
      await dropRow(a, nb.id, 'bob')
      // Kept: nothing was logged since it was read.
      assert.deepEqual(await a.directory.access('bob', nb.id), editor)
      assert.deepEqual(await a.directory.access('bob', nb.id), editor)
      // The head moves with nothing this instance could hear: it reads the membership again.
      await behindTheBack(a, 'UPDATE notes_access_clock SET sequence = sequence + 1')
      assert.equal(await a.directory.access('bob', nb.id), undefined)
      assert.equal(await a.directory.access('bob', nb.id), undefined)
    })

    it('keeps using a membership past changes elsewhere once it has heard them, and forgets one a change touches', async () => {
      const a = make()
      const b = reopen(a)
      const kept = ok(await a.directory.create('ann', 'Kept'))
      const other = ok(await a.directory.create('ann', 'Other'))
      ok(await a.directory.setRole('ann', kept.id, 'bob', 'editor'))
      const since = await a.notebook(notebookStore(kept.id)).version()
      const editor = { id: kept.id, store: notebookStore(kept.id), role: 'editor', since }
      assert.equal((await b.directory.access('ann', other.id))?.role, 'owner')
      // Subscribed after the cache (at its first read): heard here, applied there. The first
      // change it hears tells it where it is (it forgets what it kept before).
      const heard = await hearing(b)
      ok(await a.directory.setRole('ann', other.id, 'cat', 'viewer'))
      await heard.until(1)
      assert.deepEqual(await b.directory.access('bob', kept.id), editor)
      await dropRow(a, kept.id, 'bob')
      ok(await a.directory.setRole('ann', other.id, 'dan', 'viewer'))
      await heard.until(2)
      assert.deepEqual(await b.directory.access('bob', kept.id), editor)
      // A change of bob's in that notebook, heard: read again (he joins anew, as a viewer).
      ok(await a.directory.setRole('ann', kept.id, 'bob', 'viewer'))
      await heard.until(3)
      assert.deepEqual(await b.directory.access('bob', kept.id), { ...editor, role: 'viewer' })
      heard.stop()
    })

    it('forgets every membership when the changes it hears skip one', async () => {
      const a = make()
      const b = reopen(a)
      const kept = ok(await a.directory.create('ann', 'Kept'))
      const other = ok(await a.directory.create('ann', 'Other'))
      ok(await a.directory.setRole('ann', kept.id, 'bob', 'editor'))
      assert.equal((await b.directory.access('bob', kept.id))?.role, 'editor')
      const heard = await hearing(b)
      ok(await a.directory.setRole('ann', other.id, 'cat', 'viewer'))
      await heard.until(1)
      assert.equal((await b.directory.access('bob', kept.id))?.role, 'editor')
      await dropRow(a, kept.id, 'bob')
      // A change never logged (as an import makes), then one logged after it: the one heard does
      // not follow the last one applied, so nothing kept can be vouched for.
      await behindTheBack(a, 'UPDATE notes_access_clock SET sequence = sequence + 1')
      ok(await a.directory.setRole('ann', other.id, 'dan', 'viewer'))
      await heard.until(2)
      assert.equal(await b.directory.access('bob', kept.id), undefined)
      heard.stop()
    })

    it('answers for the removal on the other instance the moment it is acknowledged, with reads of the kept membership in flight', async () => {
      const a = make()
      const b = reopen(a)
      const nb = ok(await a.directory.create('ann', 'Busy'))
      let running = true
      const busy: Promise<void>[] = []
      const stale: number[] = []
      for (let round = 0; round < 60; round++) {
        ok(await a.directory.setRole('ann', nb.id, 'bob', round % 2 === 0 ? 'editor' : 'viewer'))
        assert.notEqual(await b.directory.access('bob', nb.id), undefined)
        running = true
        // Reads of bob's membership on b, one after another on each of 8 loops, until the removal.
        for (let loop = 0; loop < 8; loop++) {
          busy.push(
            (async () => {
              while (running) await b.directory.access('bob', nb.id)
            })(),
          )
        }
        await sleep(round % 5)
        assert.equal(await a.directory.removeMember('ann', nb.id, 'bob'), true)
        if ((await b.directory.access('bob', nb.id)) !== undefined) stale.push(round)
        running = false
        await Promise.all(busy.splice(0))
      }
      assert.deepEqual(stale, [])
    })
  })

  describe('PostgresNotebooks: memberships made before their start was kept', () => {
    it('takes the first read of one made by the release before as its start, on every instance, and answers one made since with its own', async () => {
      const schema = `members_before_${Date.now().toString(36)}`
      const client = new pg.Client({
        connectionString: url,
        options: `-c search_path=${schema},public`,
      })
      await client.connect()
      try {
        // The schema as the release before kept it (migrations 1 to 8), with a notebook and a
        // member as that release's acts wrote them.
        await migrate(client, schema, undefined, 8)
        await client.query(
          "INSERT INTO notes_directory (id, name, store) VALUES ('AAAAAAAAAAAAAAAAAAAAAA', 'Old', 'nb:AAAAAAAAAAAAAAAAAAAAAA')",
        )
        await client.query(
          "INSERT INTO notes_members (notebook, sub, role) VALUES ('AAAAAAAAAAAAAAAAAAAAAA', 'ann', 'owner'), ('AAAAAAAAAAAAAAAAAAAAAA', 'bob', 'viewer')",
        )
      } finally {
        await client.end()
      }
      const notebooks = new PostgresNotebooks(optionsOf(schema, {}))
      opened.push(notebooks)
      const id = 'AAAAAAAAAAAAAAAAAAAAAA'
      const store = notebookStore(id)
      // Not known: it began before now, and now stands in for it, written down once and read
      // so by every instance.
      await notebooks.notebook(store).create({ before: 'bob' })
      const bobSince = await notebooks.notebook(store).version()
      assert.deepEqual(await notebooks.directory.access('bob', id), {
        id,
        store,
        role: 'viewer',
        since: bobSince,
      })
      await notebooks.notebook(store).create({ before: 'cat' })
      const other = new PostgresNotebooks(optionsOf(schema, {}))
      opened.push(other)
      assert.equal((await other.directory.access('bob', id))?.since, bobSince)
      ok(await notebooks.directory.setRole('ann', id, 'cat', 'editor'))
      assert.deepEqual(await notebooks.directory.access('cat', id), {
        id,
        store,
        role: 'editor',
        since: await notebooks.notebook(store).version(),
      })
      // A change of role keeps the membership, and what is known of its start.
      ok(await notebooks.directory.setRole('ann', id, 'bob', 'editor'))
      assert.deepEqual(await notebooks.directory.access('bob', id), {
        id,
        store,
        role: 'editor',
        since: bobSince,
      })
    })
  })

  describe('PostgresNotebooks: the directory over two instances', () => {
    it('tells a subscriber on the other instance of a removal at once, and answers for it there', async () => {
      const a = make()
      const b = reopen(a)
      const nb = ok(await a.directory.create('ann', 'Team'))
      ok(await a.directory.setRole('ann', nb.id, 'bob', 'editor'))
      const since = await a.notebook(notebookStore(nb.id)).version()
      await a.notebook(notebookStore(nb.id)).create({ by: 'ann' })
      const heard: AccessChange[] = []
      let heardAt = 0
      const stop = b.directory.subscribe((change) => {
        heard.push(change)
        heardAt = Date.now()
      })
      assert.deepEqual(await b.directory.access('bob', nb.id), {
        id: nb.id,
        store: notebookStore(nb.id),
        role: 'editor',
        since,
      })
      const atCat = await a.notebook(notebookStore(nb.id)).version()
      ok(await a.directory.setRole('ann', nb.id, 'cat', 'viewer'))
      await waitUntil(() => heard.length === 1)
      ok(await a.directory.remove('ann', nb.id))
      const removedAt = Date.now()
      assert.equal(await b.directory.access('bob', nb.id), undefined)
      assert.equal(await b.directory.access('ann', nb.id), undefined)
      assert.deepEqual(await b.directory.members('ann', nb.id), { refused: 'not-found' })
      assert.equal((await b.stats()).notes, 0)
      await waitUntil(() => heard.length === 4)
      // The poll comes once a second: this was the notification.
      assert.ok(heardAt - removedAt < 500, `heard ${heardAt - removedAt} ms after the removal`)
      assert.deepEqual(heard, [
        { type: 'joined', notebook: nb.id, user: 'cat', version: atCat },
        { type: 'left', notebook: nb.id, user: 'ann' },
        { type: 'left', notebook: nb.id, user: 'bob' },
        { type: 'left', notebook: nb.id, user: 'cat' },
      ])
      stop()
    })

    it('applies no write of a removed member once the removal answered, on another instance', async () => {
      const a = make()
      const b = reopen(a)
      const nb = ok(await a.directory.create('ann', 'Raced'))
      const store = notebookStore(nb.id)
      const shared = JSON.parse((await a.notebook(store).create({ n: 0 })).json) as { id: number }
      const bob = b.writerFor(store, 'bob')
      const lost = (err: unknown) => err instanceof AccessLostError && err.role === undefined
      const idOf = (json: string) => (JSON.parse(json) as { id: number }).id
      /** The notes bob's writes made, as they answered them, and the last round his update won. */
      const made: string[] = []
      let updatedIn: number | undefined
      for (let round = 0; round < 50; round++) {
        ok(await a.directory.setRole('ann', nb.id, 'bob', 'editor'))
        const writes = [
          async () => made.push((await bob.create({ round, n: 1 })).json),
          async () => {
            await bob.update(shared.id, { round })
            updatedIn = round
          },
          async () => {
            const result = await bob.batch(async (w) => (await w.create({ round, n: 2 })).json)
            made.push(result?.body as string)
          },
          async () =>
            made.push((await bob.createOnce(`key-${round}`, 'b', { round, n: 3 })).note.json),
        ].map((write) =>
          write().then(
            () => undefined,
            (err: unknown) => err,
          ),
        )
        await sleep(round % 4)
        assert.equal(await a.directory.removeMember('ann', nb.id, 'bob'), true)
        const atRemoval = (await a.notebook(store).list()).json
        await assert.rejects(async () => bob.create({ late: round }), lost)
        await assert.rejects(async () => bob.delete(shared.id), lost)
        for (const err of await Promise.all(writes)) {
          if (err !== undefined) assert.ok(lost(err), String(err))
        }
        // Nothing bob sent was applied after the removal answered.
        assert.equal((await a.notebook(store).list()).json, atRemoval)
      }
      // Every write that answered is there, as it answered.
      const notes = JSON.parse((await a.notebook(store).list()).json) as { id: number }[]
      const sharedNow = updatedIn === undefined ? { n: 0 } : { n: 0, round: updatedIn }
      assert.deepEqual(
        notes,
        [{ ...sharedNow, id: shared.id }, ...made.map((json) => JSON.parse(json))].sort(
          (x, y) => x.id - y.id,
        ),
      )
      assert.equal(new Set(made.map(idOf)).size, made.length)
    })

    it('makes one default notebook for a user whose first acts race on two instances', async () => {
      const a = make()
      const b = reopen(a)
      const users = Array.from({ length: 20 }, (_, n) => `user-${n}`)
      const ids = await Promise.all(
        users.flatMap((user) => [
          a.directory.defaultOf(user),
          b.directory.defaultOf(user),
          b.directory.list(user).then((list) => list[0]?.id),
        ]),
      )
      for (const [n, user] of users.entries()) {
        const id = ids[3 * n] as string
        assert.deepEqual(ids.slice(3 * n, 3 * n + 3), [id, id, id])
        assert.deepEqual(await a.directory.list(user), [
          { id, name: 'My notes', role: 'owner', members: 1 },
        ])
      }
    })
  })
}
