import { takePidLock } from '../../durable/pid-lock.js'
import { JournalOpenError } from './journal-open-error.js'

/**
 * One process per journal, with the PID lock of durable/pid-lock.ts and the
 * journal's own words for a refusal. '/data/notes.journal' -> '/data/notes.journal.lock' holding
 * '4242\n'.
 */
export function takeLock(lockPath: string, dataPath: string): void {
  const pid = takePidLock(lockPath, (err) => JournalOpenError.from(err, dataPath))
  if (pid !== undefined) {
    throw new JournalOpenError(
      `DATA_FILE ${dataPath} is in use by process ${pid} (lock ${lockPath}); one process per file.`,
    )
  }
}
