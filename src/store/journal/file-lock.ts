import { describeHolder, takePidLock } from '../../durable/pid-lock.js'
import { JournalOpenError } from './journal-open-error.js'

/**
 * One process per journal, with the lock of durable/pid-lock.ts and the journal's own words for
 * a refusal. '/data/notes.journal' -> '/data/notes.journal.lock'. A holder seen only through its
 * lease (another container or host) is refused with the time the lease lapses, which start-up
 * waits for (server.ts).
 */
export function takeLock(lockPath: string, dataPath: string): void {
  const holder = takePidLock(lockPath, (err) => JournalOpenError.from(err, dataPath))
  if (holder !== undefined) {
    throw new JournalOpenError(
      `DATA_FILE ${dataPath} is in use by ${describeHolder(holder, lockPath)}; one process per file.`,
      holder.leaseEndsAt,
    )
  }
}
