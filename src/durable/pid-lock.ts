import { readFileSync, rmSync, writeFileSync } from 'node:fs'

/**
 * One opener per file, for the service's journal and the client's file storage. Node has no flock,
 * so the lock is a file created only if absent (`wx`) that holds the owner's PID; a lock whose PID
 * no longer runs is stale (a kill -9) and is taken over. '/data/notes.journal.lock' holding
 * '4242\n'. What a refusal says is each caller's own.
 */

/**
 * Takes the lock at `lockPath`: undefined once taken, or the PID of the running process that holds
 * it (this process's own when another opener in it has it). A file system's refusal to create it
 * is thrown as `refused(err)`.
 */
export function takePidLock(
  lockPath: string,
  refused: (err: unknown) => Error,
): number | undefined {
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lockPath, `${process.pid}\n`, { flag: 'wx' })
      return undefined
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw refused(err)
    }
    const pid = Number.parseInt(readLock(lockPath), 10)
    if (Number.isSafeInteger(pid) && pid > 0 && isRunning(pid)) return pid
    rmSync(lockPath, { force: true })
  }
}

/** Removes the lock (nothing when it is gone already). */
export function releasePidLock(lockPath: string): void {
  rmSync(lockPath, { force: true })
}

function readLock(lockPath: string): string {
  try {
    return readFileSync(lockPath, 'utf8')
  } catch {
    // Removed meanwhile: the next attempt takes it.
    return ''
  }
}

/** Signal 0 checks that the process exists; EPERM means it does, as another user's. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
