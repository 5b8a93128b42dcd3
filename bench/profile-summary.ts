/**
 * node dist/bench/profile-summary.js FILE.cpuprofile [--top N]
 *
 * Where a server's CPU went, from a profile taken with `npm run bench -- --cpu-prof`:
 * self time by module group (node internals, fastify, pino, the service's src/, ...) and the
 * N functions with the most self time. Idle time (waiting in epoll) is left out of the shares.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** 'file:///x/node_modules/fastify/lib/reply.js' -> 'fastify'; 'node:internal/http' -> 'node' */
function groupOf(url: string, functionName: string): string {
  if (url === '') {
    if (functionName === '(idle)') return '(idle)'
    if (functionName === '(garbage collector)') return '(gc)'
    return functionName.startsWith('(') ? functionName : '(native)'
  }
  if (url.startsWith('node:')) return 'node'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg?.[1] !== undefined) return pkg[1]
  const own = /\/dist\/((?:src|bench)\/.*)$/.exec(url)
  return own?.[1] ?? url
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' } },
})
const file = positionals[0]
if (file === undefined) throw new Error('usage: profile-summary FILE.cpuprofile [--top N]')
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const selfTime = new Map<number, number>()
profile.samples.forEach((id, i) => {
  selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})

const groups = new Map<string, number>()
const functions = new Map<string, number>()
let busy = 0
for (const [id, time] of selfTime) {
  const node = byId.get(id)
  if (node === undefined) continue
  const { functionName, url, lineNumber } = node.callFrame
  const group = groupOf(url, functionName)
  if (group === '(idle)') continue
  busy += time
  groups.set(group, (groups.get(group) ?? 0) + time)
  const key = `${functionName || '(anonymous)'}  ${group}${url === '' ? '' : `:${lineNumber + 1}`}`
  functions.set(key, (functions.get(key) ?? 0) + time)
}

const percent = (time: number): string => `${((time / busy) * 100).toFixed(1).padStart(5)}%`
process.stdout.write(`busy ${(busy / 1e6).toFixed(2)} s of CPU in ${file}\n\nby group:\n`)
for (const [group, time] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
  process.stdout.write(`  ${percent(time)}  ${group}\n`)
}
process.stdout.write('\ntop functions (self time):\n')
for (const [name, time] of [...functions]
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(values.top))) {
  process.stdout.write(`  ${percent(time)}  ${name}\n`)
}
