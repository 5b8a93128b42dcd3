import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { listenErrorMessage } from '../../src/config/listen-error.js'

const CHOOSE_HOST =
  'choose another with HOST=... or --host ... (127.0.0.1 for this machine only, 0.0.0.0 for every interface)'

describe('listenErrorMessage', () => {
  const cases: [unknown, string | undefined][] = [
    [
      { code: 'EADDRINUSE' },
      'PORT 3000 is already in use on 127.0.0.1; choose another with PORT=... or --port ...',
    ],
    [
      { code: 'EACCES' },
      'PORT 3000 on 127.0.0.1 needs privileges this process does not have; choose one above 1023 with PORT=... or --port ...',
    ],
    [{ code: 'EADDRNOTAVAIL' }, `HOST 127.0.0.1 is not an address of this machine; ${CHOOSE_HOST}`],
    [
      { code: 'EAFNOSUPPORT' },
      `HOST 127.0.0.1 is of an address family (IPv4 or IPv6) that this machine does not support; ${CHOOSE_HOST}`,
    ],
    [
      { code: 'ENOTFOUND' },
      `HOST 127.0.0.1 does not resolve to an address (ENOTFOUND); ${CHOOSE_HOST}`,
    ],
    [
      { code: 'EAI_AGAIN' },
      `HOST 127.0.0.1 does not resolve to an address (EAI_AGAIN); ${CHOOSE_HOST}`,
    ],
    [{ code: 'EMFILE' }, undefined],
    [new Error('a bug'), undefined],
    [undefined, undefined],
    ['EADDRINUSE', undefined],
  ]
  for (const [error, message] of cases) {
    it(`${JSON.stringify(error) ?? String(error)} -> ${message ?? 'undefined (a bug: logged with its stack)'}`, () => {
      assert.equal(listenErrorMessage(error, { port: 3000, host: '127.0.0.1' }), message)
    })
  }
})
