/**
 * A journal that cannot be opened: its one-line message is what start-up prints
 * before it exits 2. 'DATA_FILE /data/notes is not a notes-service journal.'
 */
export class JournalOpenError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'JournalOpenError'
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
