/**
 * A journal that cannot be opened: its one-line message is what start-up prints
 * before it exits 2. 'DATA_FILE /data/notes is not a notes-service journal.'
 */
export class JournalOpenError extends Error {
  /**
   * The file is locked by a holder seen only through its lease, which lapses at this time (ms
   * since the epoch) unless renewed: opening again then may succeed.
   */
  readonly leaseEndsAt: number | undefined

  constructor(message: string, leaseEndsAt?: number) {
    super(message)
    this.name = 'JournalOpenError'
    this.leaseEndsAt = leaseEndsAt
  }

  /** A file-system error, told in one line: 'cannot open DATA_FILE /x: EACCES (permission denied).' */
  static from(err: unknown, path: string): JournalOpenError {
    if (err instanceof JournalOpenError) return err
    const { code, message } = err as NodeJS.ErrnoException
    if (code === 'EISDIR') return new JournalOpenError(`DATA_FILE ${path} is a directory.`)
    const reason = code === undefined ? message : `${code}: ${message.replace(/^\w+: /, '')}`
    return new JournalOpenError(`cannot open DATA_FILE ${path}: ${reason.split('\n')[0]}`)
  }
}
