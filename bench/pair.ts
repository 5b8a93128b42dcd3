/**
 * node dist/bench/pair.js --workload W1 --rounds 5 A=path/server.js B=path/server.js
 *
 * A development tool for before/after comparisons on a busy machine: runs two servers at the
 * same time on the same CPU, each driven by its own load generator on the other CPU. The
 * scheduler shares the CPU fairly between them, so their throughput ratio is the inverse of
 * their CPU cost per request, and whatever else runs on the machine slows both alike.
 * Not the benchmark's figures (those come from `npm run bench`); a way to decide a change.
 */
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { chooseGenerator } from './load.js'
import { preload } from './preload.js'
import { choosePinning, startServer, targetFromSpec } from './server-process.js'
import { WORKLOADS } from './workloads.js'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    workload: { type: 'string', default: 'W1' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
  },
})
const workload = WORKLOADS.find((w) => w.id === values.workload)
if (workload === undefined || positionals.length !== 2) {
  throw new Error('usage: pair.js --workload W1 A=server.js B=server.js')
}
const targets = positionals.map(targetFromSpec)
const generator = chooseGenerator(undefined)
const pinning = choosePinning(availableParallelism())
const ratios: number[] = []
for (let round = 0; round < Number(values.rounds); round++) {
  const servers = await Promise.all(
    targets.map((t) => startServer(t, pinning?.serverCpu, '/dev/null')),
  )
  try {
    const requests = await Promise.all(
      servers.map(async (s) => workload.request(await preload(s.port, workload.preload))),
    )
    const drive = (durationS: number) =>
      Promise.all(
        servers.map((s, i) =>
          generator.run({
            port: s.port,
            request: requests[i] ?? workload.request({ middle: undefined, last: undefined }),
            connections: Number(values.connections),
            durationS,
            cpu: pinning?.generatorCpu,
          }),
        ),
      )
    await drive(1)
    const [a, b] = await drive(Number(values.duration))
    if (a === undefined || b === undefined) throw new Error('no result')
    ratios.push(a.rps / b.rps)
    process.stdout.write(
      `round ${round + 1}: ${targets[0]?.id} ${Math.round(a.rps)} req/s, ${targets[1]?.id} ` +
        `${Math.round(b.rps)} req/s, ratio ${(a.rps / b.rps).toFixed(3)}\n`,
    )
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
  }
}
ratios.sort((x, y) => x - y)
process.stdout.write(
  `median ratio ${targets[0]?.id}/${targets[1]?.id}: ${ratios[Math.floor(ratios.length / 2)]?.toFixed(3)}\n`,
)
