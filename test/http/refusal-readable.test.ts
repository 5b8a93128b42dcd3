import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type CpuBurners, startCpuBurners } from '../hostile/cpu-burners.js'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { type UploadOutcome, uploadLarge, uploadWholeBody } from '../hostile/upload.js'

const TOO_LARGE =
  '{"type":"about:blank","title":"Payload Too Large","status":413,"detail":"The request body is larger than the limit of 1048576 bytes."}'
const RUNS = 20
const UPLOAD_BYTES = 20 * 1000 * 1000

function summary(outcome: UploadOutcome): string {
  return outcome.error === undefined && outcome.responseRead && outcome.status === 413
    ? 'read the 413'
    : `${outcome.status ?? 'no response'} ${outcome.error ?? ''}${outcome.errorBeforeResponse ? ' before the response' : ''}`
}

/**
 * A client streaming a body far over the limit reads the 413, never a reset, also
 * while other processes keep every CPU busy (the reset used to win 1 run in 3 under load).
 */
describe('a 20 MB upload refused with 413, on a machine with busy CPUs', () => {
  let server: ServerProcess
  let burners: CpuBurners
  before(async () => {
    server = await startServer()
    burners = startCpuBurners(2, 120_000)
  })
  after(async () => {
    await burners.stop()
    await server.stop()
  })

  const clients = [
    ['node:http, which stops sending when the server closes its side', uploadLarge],
    ['a client that sends the whole body before reading', uploadWholeBody],
  ] as const
  for (const [client, upload] of clients)
    for (const chunked of [false, true]) {
      it(`every one of ${RUNS} uploads reads the 413 (${chunked ? 'chunked' : 'Content-Length'}; ${client})`, async () => {
        const outcomes: string[] = []
        for (let i = 0; i < RUNS; i++) {
          const outcome = await upload(server.host, server.port, {
            bytes: UPLOAD_BYTES,
            chunked,
            timeoutMs: 20_000,
          })
          outcomes.push(summary(outcome))
          if (summary(outcome) === 'read the 413') {
            assert.equal(outcome.body, TOO_LARGE)
            assert.equal(outcome.connection, 'close')
          }
        }
        assert.deepEqual(
          outcomes,
          Array.from({ length: RUNS }, () => 'read the 413'),
        )
      })
    }
})
