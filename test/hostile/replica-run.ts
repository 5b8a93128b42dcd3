/**
 * The replica's model-based sync run: 2-4 replicas (each behind its own TCP relay, over its own
 * storage) and a direct API writer make random writes while relays drop connections, replicas
 * go offline and come back, and replicas restart over their storage (a stop mid-request is a
 * crash: the request may or may not have been applied). A feed reader logs every change of the
 * service from the start. At the end, all online, conflicts resolved and `sync()` on each:
 * - the log, replayed in order (the model of the service), equals the service's list;
 * - every replica's view equals that list, with nothing queued;
 * - no write was applied twice (each write carries a unique tag, seen at most once in the log);
 * - every create was applied exactly once, and every update of a replica exactly once unless its
 *   note was in a conflict (then it was folded into the conflict and its resolution decided).
 * Reproducible from the seed (up to timing: the network's interleaving is real).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type ChangeEvent,
  MemoryReplicaStorage,
  NotesClient,
  Replica,
  type ReplicaConflict,
} from '../../src/client/index.js'
import { Relay } from '../support/client-relay.js'
import { createRandom, type Random } from './prng.js'

export interface ReplicaRunOptions {
  /** The service's port on 127.0.0.1. */
  port: number
  seed: number
  replicas: number
  /** Random operations before the end. */
  steps: number
}

export interface ReplicaRunStats {
  steps: number
  byKind: Record<string, number>
  conflicts: number
  /** Replicas that met a reset of the feed (and loaded the list again). */
  resets: number
  notesAtEnd: number
  changesLogged: number
}

class ReplicaRunFailure extends Error {
  constructor(
    readonly seed: number,
    message: string,
  ) {
    super(`replica run with seed ${seed}: ${message}`)
  }
}

const NOWHERE = 9
const RETRIES = { retries: { limit: 1, maxDelayMs: 100 } }

interface Member {
  name: string
  relay: Relay
  storage: MemoryReplicaStorage
  replica: Replica
  offline: boolean
  /** Entry keys that have been in a conflict. */
  conflicted: Set<string>
}

/** A replica's write: its tag, and the entry it was made on. */
interface Written {
  tag: string
  member: string
  entry: string
  op: 'create' | 'update'
}

type Json = Record<string, unknown>

export async function runReplicaFuzz(options: ReplicaRunOptions): Promise<ReplicaRunStats> {
  const { port, seed } = options
  const random = createRandom(seed)
  const fail = (message: string): never => {
    throw new ReplicaRunFailure(seed, message)
  }
  const direct = new NotesClient({ baseUrl: `http://127.0.0.1:${port}`, ...RETRIES })
  const stop = new AbortController()
  const start = await direct.list()
  const log: ChangeEvent[] = []
  const reading = (async () => {
    for await (const event of direct.events({ since: start.version, signal: stop.signal })) {
      log.push(event)
    }
  })().catch(() => {})
  const members: Member[] = []
  const written: Written[] = []
  const byKind: Record<string, number> = {}
  let conflicts = 0
  let resets = 0
  const resolved = new Set<string>()
  const resolve = async (
    replica: Replica,
    conflict: ReplicaConflict,
    choice: 'mine' | 'theirs' | { note: Json },
  ): Promise<void> => {
    for (const version of [conflict.mine, conflict.theirs]) {
      if (typeof version?.w === 'string') resolved.add(version.w)
    }
    await replica.resolve(conflict.key, choice)
  }
  let tags = 0
  const count = (kind: string): void => {
    byKind[kind] = (byKind[kind] ?? 0) + 1
  }
  const open = async (member: Omit<Member, 'replica'>): Promise<Replica> => {
    const client = new NotesClient({ baseUrl: member.relay.url, ...RETRIES })
    const replica = await Replica.open({ client, storage: member.storage, maxDelayMs: 200 })
    replica.subscribe((event) => {
      if (event.type === 'reset') resets++
      if (event.type !== 'conflict') return
      for (const conflict of replica.conflicts) {
        if (!member.conflicted.has(conflict.entry)) conflicts++
        member.conflicted.add(conflict.entry)
      }
    })
    replica.start()
    return replica
  }
  try {
    for (let i = 0; i < options.replicas; i++) {
      const relay = await Relay.start(port)
      const member = {
        name: `r${i}`,
        relay,
        storage: new MemoryReplicaStorage(),
        offline: false,
        conflicted: new Set<string>(),
      }
      members.push({ ...member, replica: await open(member) })
    }
    const content = (tag: string): Json => {
      const note: Json = { w: tag, n: random.int(1000) }
      if (random.chance(0.3)) note.nested = { a: random.int(5), s: random.pick(['x', 'Yy', 'z']) }
      if (random.chance(0.2)) note.gone = null
      return note
    }
    for (let step = 0; step < options.steps; step++) {
      const member = random.pick(members)
      const replica = member.replica
      const kind = random.weighted<string>([
        [6, 'create'],
        [8, 'update'],
        [2, 'delete'],
        [4, 'direct'],
        [2, 'drop'],
        [2, 'offline'],
        [1, 'restart'],
        [2, 'resolve'],
        [3, 'pause'],
      ])
      count(kind)
      const entries = replica.notes()
      switch (kind) {
        case 'create': {
          const tag = `${member.name}-${++tags}`
          const entry = await replica.create(content(tag))
          written.push({ tag, member: member.name, entry: entry.key, op: 'create' })
          break
        }
        case 'update': {
          if (entries.length === 0) break
          const entry = random.pick(entries)
          const tag = `${member.name}-${++tags}`
          const merge = random.chance(0.3)
          const patch = merge
            ? { w: tag, nested: random.chance(0.5) ? null : { b: 1 } }
            : content(tag)
          await replica.update(entry.key, patch, { mergePatch: merge })
          written.push({ tag, member: member.name, entry: entry.key, op: 'update' })
          break
        }
        case 'delete': {
          if (entries.length === 0) break
          await replica.delete(random.pick(entries).key)
          break
        }
        case 'direct': {
          const notes = (await direct.list()).notes
          const tag = `d-${++tags}`
          const action = random.int(3)
          if (action === 0 || notes.length === 0) await direct.create(content(tag))
          else {
            const note = random.pick(notes)
            try {
              if (action === 1) await direct.update(note.id, content(tag), { ifMatch: false })
              else await direct.delete(note.id, { ifMatch: false })
            } catch (err) {
              // A replica deleted it meanwhile.
              if ((err as { status?: number }).status !== 404) throw err
            }
          }
          break
        }
        case 'drop':
          member.relay.cutAll()
          break
        case 'offline':
          member.offline = !member.offline
          member.relay.target = member.offline ? NOWHERE : port
          if (member.offline) member.relay.cutAll()
          break
        case 'restart': {
          await replica.stop()
          member.replica = await open(member)
          break
        }
        case 'resolve': {
          const conflict = replica.conflicts[0]
          if (conflict === undefined) break
          await resolve(replica, conflict, pickChoice(random, conflict.mine))
          break
        }
        case 'pause':
          await sleep(random.int(30))
          break
      }
      if (random.chance(0.3)) await sleep(random.int(5))
    }

    // The end: everyone online, every conflict resolved, every replica synced.
    for (const member of members) {
      member.offline = false
      member.relay.target = port
    }
    const signal = AbortSignal.timeout(60_000)
    for (let round = 0; ; round++) {
      for (const member of members) await member.replica.sync({ signal })
      const open = members.filter((member) => member.replica.conflicts.length > 0)
      if (open.length === 0) break
      if (round > 10) fail('conflicts keep coming after 10 rounds of resolving them')
      for (const member of open) {
        for (const conflict of member.replica.conflicts) {
          const choice = round > 3 ? 'theirs' : pickChoice(random, conflict.mine)
          await resolve(member.replica, conflict, choice)
        }
      }
    }
    for (const member of members) await member.replica.sync({ signal })
    const final = await direct.list()
    const deadline = Date.now() + 10_000
    while (log.at(-1)?.version !== final.version && final.version !== start.version) {
      if (Date.now() > deadline) fail('the feed reader never reached the final version')
      await sleep(10)
    }

    // The model: the log replayed over the list at the start.
    const model = new Map<number, Json>()
    for (const note of start.notes) model.set(note.id, note)
    const seen = new Map<string, number>()
    for (const event of log) {
      if (event.type === 'reset' || event.type === 'revoked')
        fail(`the feed reader got ${event.type}`)
      else if (event.type === 'deleted') model.delete(event.id)
      else {
        model.set(event.note.id, event.note)
        const tag = event.note.w
        if (typeof tag === 'string') seen.set(tag, (seen.get(tag) ?? 0) + 1)
      }
    }
    const modelList = [...model.entries()].sort(([a], [b]) => a - b).map(([, note]) => note)
    same(modelList, final.notes, 'the log replayed differs from the service list', fail)
    for (const member of members) {
      const replica = member.replica
      if (replica.waiting !== 0) fail(`${member.name} still has ${replica.waiting} writes queued`)
      same(
        replica.notes().map((entry) => entry.note),
        final.notes,
        `${member.name}'s view differs from the service list`,
        fail,
      )
    }
    // A resolution writes mine (or theirs's fields) again: their tags may be seen again.
    // Nothing left behind in the storage: no acknowledged write, echo or stale link.
    for (const member of members) {
      const stored = await member.storage.load()
      const meta = [...stored.meta.keys()]
      const echoes = meta.filter((key) => key.startsWith('echo:')).length
      const keys = new Set(member.replica.notes().map((entry) => entry.key))
      const stale = meta.filter(
        (key) => key.startsWith('link:') && !keys.has(key.slice('link:'.length)),
      ).length
      if (stored.outbox.size + stored.conflicts.size + echoes + stale > 0) {
        fail(
          `${member.name}'s storage keeps ${stored.outbox.size} outbox entries, ${stored.conflicts.size} conflicts, ${echoes} echoes, ${stale} links to no entry`,
        )
      }
      if (stored.notes.size !== final.notes.length)
        fail(`${member.name} stores ${stored.notes.size} notes`)
    }
    for (const [tag, times] of seen) {
      if (times > 1 && !resolved.has(tag)) fail(`the write ${tag} was applied ${times} times`)
    }
    for (const write of written) {
      const member = members.find((m) => m.name === write.member) as Member
      const times = seen.get(write.tag) ?? 0
      if (resolved.has(write.tag)) {
        if (write.op === 'create' && times === 0) fail(`the create ${write.tag} was lost`)
        continue
      }
      if (write.op === 'create' && times !== 1) {
        fail(`the create ${write.tag} of ${write.member} was applied ${times} times`)
      }
      if (write.op === 'update' && times !== 1 && !member.conflicted.has(write.entry)) {
        fail(
          `the update ${write.tag} of ${write.member} was applied ${times} times, with no conflict`,
        )
      }
    }
    return {
      steps: options.steps,
      byKind,
      conflicts,
      resets,
      notesAtEnd: final.notes.length,
      changesLogged: log.length,
    }
  } finally {
    stop.abort()
    await reading
    for (const member of members) {
      await member.replica.stop()
      await member.relay.close()
    }
  }
}

function pickChoice(random: Random, mine: Json | null): 'mine' | 'theirs' | { note: Json } {
  const choice = random.int(3)
  if (choice === 0) return 'mine'
  if (choice === 1 || mine === null) return 'theirs'
  return { note: { ...mine, merged: true } }
}

function same(actual: unknown, expected: unknown, message: string, fail: (m: string) => never) {
  const a = JSON.stringify(canonical(actual))
  const b = JSON.stringify(canonical(expected))
  if (a !== b) fail(`${message}:\n  got      ${a.slice(0, 2000)}\n  expected ${b.slice(0, 2000)}`)
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical)
  if (typeof value !== 'object' || value === null) return value
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, canonical((value as Json)[key])]),
  )
}
