import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { resumeAt } from '../../src/api/membership-resume.js'

describe('where a resumed stream goes on in a notebook its user may have left', () => {
  it('goes on from the token only when the membership began at or before it', () => {
    assert.equal(resumeAt('e.9', 'e.5'), 'token')
    assert.equal(resumeAt('e.5', 'e.5'), 'token')
    // Base 36: 'a' is 10, after 9.
    assert.equal(resumeAt('e.a', 'e.9'), 'token')
    assert.equal(resumeAt('e.9', 'e.a'), 'start')
    assert.equal(resumeAt('k2x9q1.1c', 'k2x9q1.1d'), 'start')
  })

  it('cannot tell with no start known, two epochs, or what is not a token', () => {
    assert.equal(resumeAt('e.9', undefined), 'reset')
    assert.equal(resumeAt('f.9', 'e.5'), 'reset')
    assert.equal(resumeAt('e.9', 'f.5'), 'reset')
    assert.equal(resumeAt('e9', 'e.5'), 'reset')
    assert.equal(resumeAt('.9', '.5'), 'reset')
    assert.equal(resumeAt('e.A', 'e.5'), 'reset')
    assert.equal(resumeAt('e.', 'e.5'), 'reset')
  })
})
