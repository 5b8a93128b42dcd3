import { PostgresNoteStore } from '../src/store/postgres/store.js'
import { PostgresCluster } from '../test/support/postgres-cluster.js'

/**
 * History on against history off on PostgreSQL, through the store (no HTTP): W4 (creates of a
 * ~110-byte note, 50 callers) and W5 (PATCHes of the middle note of 1,000, 50 callers), each leg
 * on a fresh database of one durable cluster, legs alternating.
 *   node dist/bench/archive-postgres.js [rounds] [seconds]
 */
const rounds = Number(process.argv[2] ?? 3)
const seconds = Number(process.argv[3] ?? 5)
const CALLERS = 50
const legs = {
  on: {},
  off: { noteHistory: 0, trashMs: 0 },
} as const

const cluster = await PostgresCluster.start()
try {
  const results: Record<string, number[]> = {}
  for (let round = 0; round < rounds; round++) {
    for (const workload of ['W4', 'W5'] as const) {
      const order = round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)
      for (const leg of order) {
        const url = await cluster.createDatabase()
        const store = new PostgresNoteStore({
          url,
          maxNotes: 10_000_000,
          maxBytes: 1 << 30,
          archive: legs[leg],
        })
        await store.open()
        let target = 0
        if (workload === 'W5') {
          const made = await Promise.all(
            Array.from({ length: 1000 }, (_, n) => store.create({ title: `note ${n}`, n })),
          )
          target = (JSON.parse((made[500] as { json: string }).json) as { id: number }).id
        }
        const body = { title: 'a note of about a hundred bytes', body: 'x'.repeat(50), n: 1 }
        const end = Date.now() + seconds * 1000
        let done = 0
        await Promise.all(
          Array.from({ length: CALLERS }, async () => {
            while (Date.now() < end) {
              if (workload === 'W4') await store.create(body)
              else await store.update(target, { title: 'note edited' })
              done++
            }
          }),
        )
        await store.close()
        const rate = done / seconds
        const key = `${workload} ${leg}`
        results[key] = [...(results[key] ?? []), rate]
        console.log(`round ${round + 1} ${workload} history ${leg}: ${rate.toFixed(0)} writes/s`)
      }
    }
  }
  for (const workload of ['W4', 'W5']) {
    const on = results[`${workload} on`] as number[]
    const off = results[`${workload} off`] as number[]
    const ratios = on.map((rate, i) => rate / (off[i] as number))
    const sorted = [...ratios].sort((a, b) => a - b)
    console.log(
      `${workload}: on/off median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(3)} (${ratios.map((r) => r.toFixed(3)).join(', ')})`,
    )
  }
} finally {
  await cluster.destroy()
}
