import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type AccessChange,
  defaultStore,
  isRefusal,
  type NotebookView,
  notebookStore,
  type Refusal,
} from '../../src/store/directory.js'
import { AccessLostError, type Notebooks } from '../../src/store/types.js'
import { waitUntil } from './store.contract.js'

export interface ContractDirectoryOptions {
  maxNotebooksPerUser?: number
  maxMembers?: number
}

/** The time the invitations of these cases are checked at: 2027-01-15T08:00:00Z. */
const NOW = 1_800_000_000_000
const DAY = 86_400_000

const NOT_FOUND = { refused: 'not-found' }

/** A value that must not be a refusal. */
function ok<T>(value: T | Refusal): T {
  if (isRefusal(value)) assert.fail(`refused: ${JSON.stringify(value)}`)
  return value as T
}

/**
 * The behaviour every directory (Notebooks.directory) must have, and the writes it guards
 * (Notebooks.writerFor): default notebooks, notebooks made, renamed and removed with their notes,
 * members and roles with the last owner kept, invitations kept as hashes and spent, and every
 * change of access heard by subscribers. `makeNotebooks` makes an empty backend; `reopen`, when
 * given, opens the same backend again (a restart, or another instance of a shared one).
 */
export function runDirectoryContract(
  name: string,
  makeNotebooks: (options: ContractDirectoryOptions) => Notebooks | Promise<Notebooks>,
  reopen?: (notebooks: Notebooks) => Notebooks | Promise<Notebooks>,
): void {
  const make = (options: ContractDirectoryOptions = {}) =>
    makeNotebooks({ maxNotebooksPerUser: 5, maxMembers: 4, ...options })

  describe(`${name}: the directory`, () => {
    it('gives every user a default notebook, theirs alone, listed first', async () => {
      const { directory } = await make()
      const ann = await directory.defaultOf('ann')
      assert.match(ann, /^[A-Za-z0-9_-]{22}$/)
      assert.equal(await directory.defaultOf('ann'), ann)
      const bob = await directory.defaultOf('bob')
      assert.notEqual(bob, ann)
      assert.deepEqual(await directory.list('ann'), [
        { id: ann, name: 'My notes', role: 'owner', members: 1 },
      ])
      assert.deepEqual(await directory.access('ann', ann), {
        id: ann,
        store: defaultStore('ann'),
        role: 'owner',
      })
      assert.equal(await directory.access('bob', ann), undefined)
      assert.equal(await directory.access('bob', 'no-such-notebook'), undefined)
      assert.deepEqual(await directory.members('bob', ann), NOT_FOUND)
    })

    it('makes, renames and lists notebooks in the order they were joined', async () => {
      const { directory } = await make()
      const first = ok(await directory.create('ann', 'Trip'))
      const second = ok(await directory.create('ann', 'Work'))
      assert.deepEqual(first, { id: first.id, name: 'Trip', role: 'owner', members: 1 })
      assert.match(first.id, /^[A-Za-z0-9_-]{22}$/)
      assert.deepEqual(ok(await directory.rename('ann', first.id, 'Holiday')), {
        ...first,
        name: 'Holiday',
      })
      const listed = await directory.list('ann')
      assert.deepEqual(
        listed.map((notebook) => notebook.name),
        ['My notes', 'Holiday', 'Work'],
      )
      assert.deepEqual((await directory.access('ann', second.id))?.store, notebookStore(second.id))
      assert.deepEqual(await directory.rename('bob', first.id, 'Mine'), NOT_FOUND)
    })

    it('counts the notebooks a user owns, the default one included', async () => {
      const { directory } = await make({ maxNotebooksPerUser: 2 })
      ok(await directory.create('ann', 'One'))
      const refused = await directory.create('ann', 'Two')
      assert.ok(isRefusal(refused) && refused.refused === 'full')
      assert.match((refused as { detail: string }).detail, /maximum of 2 notebooks/)
      // One she is a member of but does not own does not count.
      const bobs = ok(await directory.create('bob', 'Shared'))
      ok(await directory.setRole('bob', bobs.id, 'ann', 'editor'))
      assert.equal((await directory.list('ann')).length, 3)
    })

    it('adds members by sub, changes roles, and keeps the last owner', async () => {
      const { directory } = await make()
      const nb = ok(await directory.create('ann', 'Team'))
      assert.deepEqual(ok(await directory.setRole('ann', nb.id, 'bob', 'editor')), {
        user: 'bob',
        role: 'editor',
      })
      ok(await directory.setRole('ann', nb.id, 'cat', 'viewer'))
      assert.deepEqual(ok(await directory.members('cat', nb.id)), [
        { user: 'ann', role: 'owner' },
        { user: 'bob', role: 'editor' },
        { user: 'cat', role: 'viewer' },
      ])
      assert.deepEqual(await directory.setRole('bob', nb.id, 'cat', 'editor'), {
        refused: 'forbidden',
        needs: 'owner',
      })
      assert.deepEqual(await directory.setRole('ann', nb.id, 'ann', 'editor'), {
        refused: 'last-owner',
      })
      assert.deepEqual(await directory.removeMember('ann', nb.id, 'ann'), {
        refused: 'last-owner',
      })
      ok(await directory.setRole('ann', nb.id, 'bob', 'owner'))
      assert.equal(ok(await directory.setRole('ann', nb.id, 'ann', 'viewer')).role, 'viewer')
      assert.deepEqual(await directory.list('bob'), [
        (await directory.list('bob'))[0],
        { id: nb.id, name: 'Team', role: 'owner', members: 3 },
      ])
      // Leaving, and removing: the one removed is no longer a member.
      assert.equal(await directory.removeMember('cat', nb.id, 'cat'), true)
      assert.equal(await directory.access('cat', nb.id), undefined)
      assert.deepEqual(await directory.removeMember('cat', nb.id, 'ann'), NOT_FOUND)
      assert.equal(await directory.removeMember('bob', nb.id, 'ann'), true)
      assert.deepEqual(await directory.members('ann', nb.id), NOT_FOUND)
      assert.deepEqual(await directory.removeMember('bob', nb.id, 'dan'), NOT_FOUND)
    })

    it('caps the members of a notebook, its owner included', async () => {
      const { directory } = await make({ maxMembers: 2 })
      const nb = ok(await directory.create('ann', 'Pair'))
      ok(await directory.setRole('ann', nb.id, 'bob', 'viewer'))
      const refused = await directory.setRole('ann', nb.id, 'cat', 'viewer')
      assert.ok(isRefusal(refused) && refused.refused === 'full')
      // A change of a member's role is not a new member.
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      const invite = ok(
        await directory.invite('ann', nb.id, { role: 'viewer', expires: NOW + DAY, uses: 5 }),
      )
      const redeemed = await directory.redeem('cat', invite.token, NOW)
      assert.ok(isRefusal(redeemed) && redeemed.refused === 'full')
    })

    it("keeps a default notebook and its user's ownership of it", async () => {
      const { directory } = await make()
      const ann = await directory.defaultOf('ann')
      assert.deepEqual(await directory.remove('ann', ann), { refused: 'default-notebook' })
      ok(await directory.setRole('ann', ann, 'bob', 'owner'))
      assert.deepEqual(await directory.removeMember('bob', ann, 'ann'), {
        refused: 'default-notebook',
      })
      assert.deepEqual(await directory.setRole('bob', ann, 'ann', 'viewer'), {
        refused: 'default-notebook',
      })
      assert.deepEqual(await directory.removeMember('ann', ann, 'ann'), {
        refused: 'default-notebook',
      })
      // Bob, an owner too, may leave it.
      assert.equal(await directory.removeMember('bob', ann, 'bob'), true)
    })

    it('removes a notebook with its notes and invitations', async () => {
      const notebooks = await make()
      const { directory } = notebooks
      const nb = ok(await directory.create('ann', 'Gone'))
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      const store = notebooks.notebook(notebookStore(nb.id))
      await store.create({ a: 1 })
      const before = await notebooks.stats()
      assert.equal(before.notes, 1)
      const invite = ok(
        await directory.invite('ann', nb.id, { role: 'viewer', expires: NOW + DAY, uses: 1 }),
      )
      assert.deepEqual(await directory.remove('bob', nb.id), {
        refused: 'forbidden',
        needs: 'owner',
      })
      assert.deepEqual(await directory.remove('ann', nb.id), { store: notebookStore(nb.id) })
      assert.equal((await notebooks.stats()).notes, 0)
      assert.equal(await directory.access('ann', nb.id), undefined)
      assert.equal(await directory.access('bob', nb.id), undefined)
      assert.deepEqual(await directory.redeem('cat', invite.token, NOW), NOT_FOUND)
      assert.deepEqual(await directory.remove('ann', nb.id), NOT_FOUND)
      assert.equal((await directory.list('bob')).length, 1)
    })

    it('makes invitations that are spent, expire and are withdrawn', async () => {
      const { directory } = await make()
      const nb = ok(await directory.create('ann', 'Club'))
      const invite = ok(
        await directory.invite('ann', nb.id, { role: 'editor', expires: NOW + DAY, uses: 2 }),
      )
      assert.match(invite.id, /^[A-Za-z0-9_-]{22}$/)
      assert.match(invite.token, /^[A-Za-z0-9_-]{32}$/)
      assert.deepEqual(
        { ...invite, token: '' },
        { id: invite.id, token: '', role: 'editor', expires: NOW + DAY, uses: 2 },
      )
      assert.deepEqual(ok(await directory.invites('ann', nb.id, NOW)), [
        { id: invite.id, role: 'editor', expires: NOW + DAY, uses: 2 },
      ])
      assert.deepEqual(await directory.invites('bob', nb.id, NOW), NOT_FOUND)
      assert.deepEqual(await directory.redeem('bob', `${invite.token}x`, NOW), NOT_FOUND)
      assert.deepEqual(await directory.redeem('bob', invite.token, NOW + DAY), NOT_FOUND)
      assert.deepEqual(ok(await directory.redeem('bob', invite.token, NOW)), {
        id: nb.id,
        name: 'Club',
        role: 'editor',
        members: 2,
      })
      assert.equal(ok(await directory.invites('ann', nb.id, NOW))[0]?.uses, 1)
      ok(await directory.redeem('cat', invite.token, NOW))
      assert.deepEqual(await directory.redeem('dan', invite.token, NOW), NOT_FOUND)
      assert.deepEqual(ok(await directory.invites('ann', nb.id, NOW)), [])

      const second = ok(
        await directory.invite('ann', nb.id, { role: 'viewer', expires: NOW + DAY, uses: 9 }),
      )
      assert.deepEqual(await directory.withdraw('bob', nb.id, second.id), {
        refused: 'forbidden',
        needs: 'owner',
      })
      assert.equal(await directory.withdraw('ann', nb.id, second.id), true)
      assert.deepEqual(await directory.withdraw('ann', nb.id, second.id), NOT_FOUND)
      assert.deepEqual(await directory.redeem('dan', second.token, NOW), NOT_FOUND)
    })

    it('leaves a member who redeems with the higher of two roles', async () => {
      const { directory } = await make()
      const nb = ok(await directory.create('ann', 'Roles'))
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      const viewer = ok(
        await directory.invite('ann', nb.id, { role: 'viewer', expires: NOW + DAY, uses: 5 }),
      )
      assert.equal(ok(await directory.redeem('bob', viewer.token, NOW)).role, 'editor')
      const owner = ok(
        await directory.invite('ann', nb.id, { role: 'owner', expires: NOW + DAY, uses: 5 }),
      )
      assert.equal(ok(await directory.redeem('bob', owner.token, NOW)).role, 'owner')
      assert.equal(ok(await directory.redeem('ann', viewer.token, NOW)).role, 'owner')
    })

    it("tells subscribers of every change of access, in order, each join with its notes' version", async () => {
      const notebooks = await make()
      const { directory } = notebooks
      const heard: AccessChange[] = []
      const stop = directory.subscribe((change) => heard.push(change))
      const nb = ok(await directory.create('ann', 'Heard'))
      const notes = notebooks.notebook(notebookStore(nb.id))
      const made = await notes.version()
      await notes.create({ before: 'bob' })
      const atBob = await notes.version()
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      await notes.create({ after: 'bob' })
      const atCat = await notes.version()
      ok(await directory.setRole('ann', nb.id, 'bob', 'viewer'))
      ok(await directory.rename('ann', nb.id, 'Named'))
      const invite = ok(
        await directory.invite('ann', nb.id, { role: 'editor', expires: NOW + DAY, uses: 1 }),
      )
      ok(await directory.redeem('cat', invite.token, NOW))
      assert.equal(await directory.removeMember('ann', nb.id, 'bob'), true)
      ok(await directory.remove('ann', nb.id))
      const expected: AccessChange[] = [
        { type: 'joined', notebook: nb.id, user: 'ann', version: made },
        { type: 'joined', notebook: nb.id, user: 'bob', version: atBob },
        { type: 'role', notebook: nb.id, user: 'bob', role: 'viewer' },
        { type: 'renamed', notebook: nb.id, name: 'Named' },
        { type: 'joined', notebook: nb.id, user: 'cat', version: atCat },
        { type: 'left', notebook: nb.id, user: 'bob' },
        { type: 'left', notebook: nb.id, user: 'ann' },
        { type: 'left', notebook: nb.id, user: 'cat' },
      ]
      await waitUntil(() => heard.length >= expected.length)
      // The notebook's removal: every member's 'left', in any order among them.
      const userOf = (change: AccessChange) => ('user' in change ? change.user : '')
      const tail = (changes: AccessChange[]) => [
        ...changes.slice(0, 6),
        ...changes.slice(6).sort((a, b) => userOf(a).localeCompare(userOf(b))),
      ]
      assert.deepEqual(tail(heard), tail(expected))
      stop()
    })

    it('keeps where each membership began: the version its join carried, through role changes, anew after a return', async () => {
      const notebooks = await make()
      const { directory } = notebooks
      const heard: AccessChange[] = []
      const stop = directory.subscribe((change) => heard.push(change))
      const nb = ok(await directory.create('ann', 'Begun'))
      const notes = notebooks.notebook(notebookStore(nb.id))
      assert.equal((await directory.access('ann', nb.id))?.since, await notes.version())
      await notes.create({ before: 'bob' })
      const atBob = await notes.version()
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      assert.deepEqual(await directory.access('bob', nb.id), {
        id: nb.id,
        store: notebookStore(nb.id),
        role: 'editor',
        since: atBob,
      })
      await notes.create({ with: 'bob' })
      ok(await directory.setRole('ann', nb.id, 'bob', 'viewer'))
      const invite = ok(
        await directory.invite('ann', nb.id, { role: 'editor', expires: NOW + DAY, uses: 2 }),
      )
      // Redeemed by a member: the higher role, the same membership.
      ok(await directory.redeem('bob', invite.token, NOW))
      assert.deepEqual(await directory.access('bob', nb.id), {
        id: nb.id,
        store: notebookStore(nb.id),
        role: 'editor',
        since: atBob,
      })
      assert.equal(await directory.removeMember('bob', nb.id, 'bob'), true)
      await notes.create({ without: 'bob' })
      const atReturn = await notes.version()
      ok(await directory.redeem('bob', invite.token, NOW))
      assert.equal((await directory.access('bob', nb.id))?.since, atReturn)
      await waitUntil(() => heard.filter((change) => change.type === 'joined').length >= 3)
      const joins = heard.flatMap((change) =>
        change.type === 'joined' && change.user === 'bob' ? [change.version] : [],
      )
      assert.deepEqual(joins, [atBob, atReturn])
      stop()
    })

    it('applies a write only while its writer is an owner or editor', async () => {
      const notebooks = await make()
      const { directory } = notebooks
      const nb = ok(await directory.create('ann', 'Guarded'))
      const store = notebookStore(nb.id)
      ok(await directory.setRole('ann', nb.id, 'bob', 'editor'))
      const bob = notebooks.writerFor(store, 'bob')
      const note = await bob.create({ by: 'bob' })
      ok(await directory.setRole('ann', nb.id, 'bob', 'viewer'))
      await assert.rejects(
        async () => bob.update(JSON.parse(note.json).id, { by: 'bob again' }),
        (err) => err instanceof AccessLostError && err.role === 'viewer',
      )
      assert.equal(await directory.removeMember('ann', nb.id, 'bob'), true)
      await assert.rejects(
        async () => bob.create({ late: true }),
        (err) => err instanceof AccessLostError && err.role === undefined,
      )
      await assert.rejects(
        async () => bob.batch((writer) => writer.create({}) && '{}'),
        (err) => err instanceof AccessLostError,
      )
      // A viewer reads through it.
      assert.equal((await bob.list()).count, 1)
      // The owner of a default notebook writes to it; someone else does not.
      await notebooks.writerFor(defaultStore('ann'), 'ann').create({ mine: true })
      await assert.rejects(
        async () => notebooks.writerFor(defaultStore('ann'), 'bob').create({ theirs: true }),
        (err) => err instanceof AccessLostError,
      )
      assert.equal((await notebooks.stats()).notes, 2)
    })

    if (reopen !== undefined) {
      it('keeps notebooks, members and invitations across a reopening', async () => {
        const notebooks = await make()
        const { directory } = notebooks
        const ann = await directory.defaultOf('ann')
        const nb = ok(await directory.create('ann', 'Kept'))
        ok(await directory.setRole('ann', nb.id, 'bob', 'viewer'))
        const bobSince = (await directory.access('bob', nb.id))?.since
        assert.notEqual(bobSince, undefined)
        const invite = ok(
          await directory.invite('ann', nb.id, { role: 'editor', expires: NOW + DAY, uses: 2 }),
        )
        const gone = ok(await directory.create('ann', 'Gone'))
        await notebooks.notebook(notebookStore(gone.id)).create({ gone: true })
        ok(await directory.remove('ann', gone.id))
        const again = await reopen(notebooks)
        assert.equal(await again.directory.defaultOf('ann'), ann)
        assert.deepEqual(await again.directory.list('ann'), [
          { id: ann, name: 'My notes', role: 'owner', members: 1 },
          { id: nb.id, name: 'Kept', role: 'owner', members: 2 },
        ] satisfies NotebookView[])
        assert.deepEqual(ok(await again.directory.invites('ann', nb.id, NOW)), [
          { id: invite.id, role: 'editor', expires: NOW + DAY, uses: 2 },
        ])
        assert.equal((await again.directory.access('bob', nb.id))?.since, bobSince)
        assert.equal(ok(await again.directory.redeem('cat', invite.token, NOW)).role, 'editor')
        assert.equal((await again.stats()).notes, 0)
      })
    }
  })
}
