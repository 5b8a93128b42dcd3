import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { JournalOpenError } from './journal-open-error.js'

/**
 * One process per journal (DECISION 37). Node has no flock, so the lock is a file created only if
 * absent (`wx`) that holds the owner's PID; a lock whose PID no longer runs is stale (a kill -9)
 * and is taken over. '/data/notes.journal' -> '/data/notes.journal.lock' holding '4242\n'.
 */
export function takeLock(lockPath: string, dataPath: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lockPath, `${process.pid}\n`, { flag: 'wx' })
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) {
        throw JournalOpenError.from(err, dataPath)
      }
    }
    const pid = Number.parseInt(readLock(lockPath), 10)
    if (Number.isSafeInteger(pid) && pid > 0 && isRunning(pid)) {
      throw new JournalOpenError(
        `DATA_FILE ${dataPath} is in use by process ${pid} (lock ${lockPath}); one process per file.`,
      )
    }
    rmSync(lockPath, { force: true })
  }
}

export function releaseLock(lockPath: string): void {
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
