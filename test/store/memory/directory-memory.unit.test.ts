import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { NotebookView } from '../../../src/store/directory.js'
import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { runDirectoryContract } from '../../support/directory.contract.js'

runDirectoryContract(
  'MemoryNotebooks',
  (options) => new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1 << 20, ...options }),
)

describe('MemoryDirectory.records', () => {
  it('rebuilds every notebook, membership (in the order each began) and invitation', () => {
    const make = () =>
      new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1 << 20, maxMembers: 10 }).directory
    const directory = make()
    const first = directory.create('ann', 'First') as NotebookView
    const second = directory.create('cat', 'Second') as NotebookView
    // Bob joins the later notebook first; a sub may hold a line break.
    directory.setRole('cat', second.id, 'bob\nby', 'viewer')
    directory.setRole('ann', first.id, 'bob\nby', 'editor')
    directory.setRole('ann', first.id, 'dan', 'viewer')
    directory.removeMember('ann', first.id, 'dan')
    directory.setRole('ann', first.id, 'dan', 'owner')
    directory.invite('ann', first.id, { role: 'viewer', expires: 2e12, uses: 3 })
    // Everyone's default notebook is made before the copy (a first act makes it).
    const users = ['ann', 'bob\nby', 'cat', 'dan']
    for (const user of users) directory.list(user)
    const copy = make()
    for (const record of directory.records()) copy.replay(record)
    for (const user of users) {
      assert.deepEqual(copy.list(user), directory.list(user), user)
    }
    assert.deepEqual(copy.members('ann', first.id), directory.members('ann', first.id))
    assert.deepEqual(copy.invites('ann', first.id, 0), directory.invites('ann', first.id, 0))
    assert.deepEqual([...copy.records()], [...directory.records()])
  })
})
