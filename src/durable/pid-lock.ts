import {
  closeSync,
  fstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { hostname } from 'node:os'
import { resolve } from 'node:path'

/**
 * One opener per file, for the service's journal and the client's file storage. Node has no flock,
 * so the lock is a file created only if absent (`wx`) that holds its owner's identity, one JSON
 * line: '{"pid":4242,"start":81234,"boot":"dcf5...","pidns":"pid:[4026531836]","host":"web-1"}'
 * (`start`: the process's start time in clock ticks since boot, /proc/<pid>/stat's field 22; the
 * /proc fields are absent off Linux). A PID alone names no process for long: it is reused, after a
 * reboot, and in a container the service is PID 1 on every start. So a holder is judged by what
 * can be seen of it from here (judge below):
 * - same boot and PID namespace: alive iff /proc/<pid>/stat exists, is not a zombie (`Z`, killed
 *   but not reaped) or dead (`X`), and started at the recorded tick;
 * - this process's PID: held only by this very process (its start time, or off Linux the set of
 *   locks it holds), else left by a previous life of the PID: stale;
 * - same host, another boot id: stale (the machine rebooted);
 * - another PID namespace (another container, or this container restarted) or another host (a
 *   shared volume): a lease. The owner touches the lock's mtime every LEASE_RENEW_MS; unrenewed
 *   for LEASE_MS, it is stale. The mtime is the owner's clock and is read against the opener's.
 * - a legacy lock, a bare PID line ('4242\n') from older versions: alive iff that PID runs (and is
 *   no zombie); a PID 1 or this process's PID is stale, since neither can be another live opener
 *   of this file in one PID namespace (PID 1 is the init or, in a container, this service's own
 *   previous start).
 * A stale lock is taken over under a guard, `<lock>.takeover` (created with `wx`), so that of
 * openers that judge it stale at once exactly one replaces it. What a refusal says is each
 * caller's own (describeHolder for the holder).
 */

/** How often an owner touches its lock, so that an opener that cannot see its process sees it live. */
const LEASE_RENEW_MS = 5_000
/** A lock whose owner cannot be seen from here is stale once it has not been touched for this long. */
const LEASE_MS = 30_000
/**
 * A takeover guard, or a lock still empty, older than this was left by an opener that died in the
 * middle (a takeover takes milliseconds).
 */
const GUARD_MS = 5_000
/** An opener that finds the lock changing this long (guards, takeovers) gives up. */
const GIVE_UP_MS = 2 * GUARD_MS

/** Who holds a lock, as far as this process can tell. */
export interface LockHolder {
  pid: number
  /** This process holds it (another opener in it). */
  own: boolean
  /** The holder's host name, when it is not this one. */
  host?: string
  /** The holder is in another PID namespace of this machine (another container). */
  otherNamespace?: boolean
  /**
   * The holder cannot be seen from here: the lock is taken over once not renewed by this time
   * (ms since the epoch, by this machine's clock).
   */
  leaseEndsAt?: number
}

/** What a lock file says of its owner. */
interface Owner {
  pid: number
  start?: number
  boot?: string
  pidns?: string
  host?: string
}

interface Found {
  text: string
  ino: number
  mtimeMs: number
}

type Verdict = { holder: LockHolder } | 'stale' | 'busy'

/** The locks this process holds: resolved path -> the text it wrote and its renewal timer. */
const held = new Map<string, { text: string; timer: NodeJS.Timeout }>()
let self: Owner | undefined

/**
 * Takes the lock at `lockPath`: undefined once taken (and renewed until releasePidLock), or who
 * holds it. A file system's refusal is thrown as `refused(err)`.
 */
export function takePidLock(
  lockPath: string,
  refused: (err: unknown) => Error,
): LockHolder | undefined {
  const me = thisProcess()
  const text = `${JSON.stringify(me)}\n`
  const key = resolve(lockPath)
  const giveUpAt = Date.now() + GIVE_UP_MS
  for (;;) {
    if (create(lockPath, text, refused)) {
      hold(key, lockPath, text)
      return undefined
    }
    const found = readLock(lockPath)
    if (found === undefined) continue
    const verdict = judge(found, me, held.has(key))
    if (verdict !== 'stale' && verdict !== 'busy') return verdict.holder
    if (verdict === 'stale' && takeOver(lockPath, found, text, refused)) {
      hold(key, lockPath, text)
      return undefined
    }
    if (Date.now() > giveUpAt) {
      throw refused(new Error(`${lockPath} kept changing for ${GIVE_UP_MS / 1000} s`))
    }
    pause(10)
  }
}

/** Removes the lock if this process holds it (another owner's is left alone), and stops renewing it. */
export function releasePidLock(lockPath: string): void {
  const key = resolve(lockPath)
  const mine = held.get(key)
  if (mine === undefined) return
  clearInterval(mine.timer)
  held.delete(key)
  if (readLock(lockPath)?.text === mine.text) rmSync(lockPath, { force: true })
}

/**
 * The holder and its lock in words, for a refusal: 'process 4242 (lock /data/n.lock)', 'process 1
 * on host web-2 (lock /data/n.lock, renewed every 5 s; taken over if not renewed by
 * 2025-01-01T00:00:30.000Z)'.
 */
export function describeHolder(holder: LockHolder, lockPath: string): string {
  const where =
    holder.host !== undefined
      ? ` on host ${holder.host}`
      : holder.otherNamespace === true
        ? ' in another PID namespace'
        : ''
  const lease =
    holder.leaseEndsAt === undefined
      ? ''
      : `, renewed every ${LEASE_RENEW_MS / 1000} s; taken over if not renewed by ${new Date(holder.leaseEndsAt).toISOString()}`
  return `process ${holder.pid}${where} (lock ${lockPath}${lease})`
}

/**
 * Replaces the stale lock `found` with ours, under the takeover guard: false when another opener
 * is at it, or the lock is no longer `found` (then the caller looks again).
 */
function takeOver(
  lockPath: string,
  found: Found,
  text: string,
  refused: (err: unknown) => Error,
): boolean {
  const guard = `${lockPath}.takeover`
  if (!create(guard, text, refused)) {
    const left = readLock(guard)
    // Left by an opener that died mid-takeover. Breaking it is not itself guarded: two openers
    // finding the same dead guard at the same instant could both go on.
    if (left !== undefined && Date.now() - left.mtimeMs > GUARD_MS) rmSync(guard, { force: true })
    return false
  }
  try {
    const now = readLock(lockPath)
    // Only the opener holding the guard removes a lock, and only the very lock it judged stale.
    if (now === undefined || now.ino !== found.ino || now.text !== found.text) return false
    rmSync(lockPath, { force: true })
    return create(lockPath, text, refused)
  } finally {
    rmSync(guard, { force: true })
  }
}

function judge(found: Found, me: Owner, ours: boolean): Verdict {
  const now = Date.now()
  const owner = parseOwner(found.text)
  // Empty or torn: an opener is writing it (wx creates, then writes), or one died doing so.
  if (owner === undefined) return now - found.mtimeMs < GUARD_MS ? 'busy' : 'stale'
  const { pid } = owner
  if ('legacy' in owner) {
    // No lease is renewed on a legacy lock: a PID that exists but /proc hides is taken as live.
    return pid === 1 || pid === me.pid || isRunning(pid, undefined) === 'no'
      ? 'stale'
      : { holder: { pid, own: false } }
  }
  const lease = (where: Partial<LockHolder>): Verdict => {
    const leaseEndsAt = found.mtimeMs + LEASE_MS
    return now >= leaseEndsAt ? 'stale' : { holder: { pid, own: false, ...where, leaseEndsAt } }
  }
  if (owner.host !== me.host) return lease(owner.host === undefined ? {} : { host: owner.host })
  if (owner.boot !== me.boot) {
    return owner.boot !== undefined && me.boot !== undefined ? 'stale' : lease({})
  }
  if (owner.pidns !== me.pidns) return lease({ otherNamespace: true })
  if (pid === me.pid) {
    const same = me.start === undefined ? ours : owner.start === me.start
    return same ? { holder: { pid, own: true } } : 'stale'
  }
  const running = isRunning(pid, owner.start)
  if (running === 'hidden') return lease({})
  return running === 'yes' ? { holder: { pid, own: false } } : 'stale'
}

/** '4242\n' -> { pid: 4242, legacy: true }; a JSON line -> its fields; anything else undefined. */
function parseOwner(text: string): Owner | { pid: number; legacy: true } | undefined {
  if (/^\d+\n?$/.test(text)) {
    const pid = Number(text.trim())
    return Number.isSafeInteger(pid) && pid > 0 ? { pid, legacy: true } : undefined
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const { pid, start, boot, pidns, host } = value as Record<string, unknown>
  if (!Number.isSafeInteger(pid) || (pid as number) <= 0) return undefined
  return {
    pid: pid as number,
    ...(typeof start === 'number' ? { start } : {}),
    ...(typeof boot === 'string' ? { boot } : {}),
    ...(typeof pidns === 'string' ? { pidns } : {}),
    ...(typeof host === 'string' ? { host } : {}),
  }
}

/**
 * Whether `pid` runs here: with /proc, not a zombie and started at tick `start` when given
 * ('hidden' when /proc does not show a process that exists: mounted with hidepid); without, by
 * signal 0 (EPERM means it exists, as another user's).
 */
function isRunning(pid: number, start: number | undefined): 'yes' | 'no' | 'hidden' {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat !== undefined) {
    const fields = procStat(stat)
    if (fields === undefined || fields.state === 'Z' || fields.state === 'X') return 'no'
    return start === undefined || fields.start === start ? 'yes' : 'no'
  }
  try {
    process.kill(pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return 'no'
  }
  return self?.start === undefined ? 'yes' : 'hidden'
}

/**
 * /proc/<pid>/stat's state (field 3) and start time (field 22), read after the last ')' since
 * the command name may hold spaces and parentheses: '7 (a) b) S 1 ... 81234 ...'.
 */
function procStat(text: string): { state: string; start: number } | undefined {
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  const start = Number(fields[19])
  const state = fields[0]
  return state === undefined || !Number.isSafeInteger(start) ? undefined : { state, start }
}

function thisProcess(): Owner {
  if (self !== undefined) return self
  const start = procStat(readText('/proc/self/stat') ?? '')?.start
  const boot = readText('/proc/sys/kernel/random/boot_id')?.trim()
  let pidns: string | undefined
  try {
    pidns = readlinkSync('/proc/self/ns/pid')
  } catch {
    // Off Linux, or /proc not mounted.
  }
  self = {
    pid: process.pid,
    ...(start === undefined ? {} : { start }),
    ...(boot === undefined ? {} : { boot }),
    ...(pidns === undefined ? {} : { pidns }),
    host: hostname(),
  }
  return self
}

/** Creates `path` holding `text` if absent: false when it exists. */
function create(path: string, text: string, refused: (err: unknown) => Error): boolean {
  try {
    writeFileSync(path, text, { flag: 'wx' })
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw refused(err)
  }
}

function hold(key: string, lockPath: string, text: string): void {
  // Held already when its lock file was removed by hand and a second opener here made it anew.
  const before = held.get(key)
  if (before !== undefined) clearInterval(before.timer)
  const timer = setInterval(() => {
    // Taken over meanwhile (this process stalled past the lease): not ours to keep alive.
    if (readLock(lockPath)?.text !== text) return
    try {
      const now = new Date()
      utimesSync(lockPath, now, now)
    } catch {
      // Renewed at the next tick, or the lock is gone.
    }
  }, LEASE_RENEW_MS)
  timer.unref()
  held.set(key, { text, timer })
}

/** The lock's text and its file's identity, or undefined when there is none (removed meanwhile). */
function readLock(path: string): Found | undefined {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return undefined
  }
  try {
    const { ino, mtimeMs } = fstatSync(fd)
    return { text: readFileSync(fd, 'utf8'), ino, mtimeMs }
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

/** Blocks this thread for `ms`: a takeover by another opener lasts milliseconds. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}
