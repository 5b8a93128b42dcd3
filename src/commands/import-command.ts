import { asksForHelp } from '../config/help.js'
import { userTokensOn } from '../config/load-config.js'
import { archiveLimits, fileLimits, openDatabase } from '../open-stores.js'
import { importIntoJournal } from '../store/journal/journal-import.js'
import { type ArchiveDropped, ArchiveRules } from '../store/kernel/import-archive.js'
import type { ImportSource } from '../store/kernel/import-source.js'
import { importIntoPostgres } from '../store/postgres/postgres-import.js'
import {
  CommandError,
  type CommandStreams,
  commandConfig,
  EXIT,
  failureLine,
  Progress,
} from './command-io.js'
import { ExportFileError, readExportFile } from './export-file.js'

/**
 * `notes-service import FILE [--replace]`: the notes and files of an export file (or the notes of
 * an HTTP export, into the shared notebook) into the configured store (DATA_FILE or
 * DATABASE_URL), without the HTTP server. The whole file is checked first; a store that holds
 * notes or files is refused without --replace; nothing changes on a refusal.
 */

const IMPORT_USAGE = 'notes-service import FILE [--replace]'

/** What `notes-service import --help` prints. */
export const IMPORT_HELP = `Usage: ${IMPORT_USAGE}

Reads FILE, an export (of notes-service export, with its notes' history, its trash and its files,
or of the HTTP export, which goes into the shared notebook), into the store that DATA_FILE or
DATABASE_URL names, without starting the HTTP server. The whole file is checked first (every
file's bytes against its SHA-256), and nothing changes on a refusal; the history and trash are
kept as NOTE_HISTORY, HISTORY_DAYS, MAX_HISTORY_BYTES and TRASH_DAYS keep them (one line on stderr
says what went), each revision under a new version; into DATA_FILE nothing changes unless all of it is imported, into
DATABASE_URL the notes are one transaction and the files are stored after it. A DATA_FILE in use
by a running service is refused.

  FILE
      the export file to read
  --replace
      replace every notebook the store holds, its history, trash and files; without it, a store
      that holds notes, deleted notes or files is refused
  --help, -h
      print this help and exit

Reads DATA_FILE or DATABASE_URL (and the other settings) from the environment, as the service
does. Exit codes: 0 done, 1 refused or failed (one line on stderr, nothing changed), 2 a usage
error or a bad setting.
`

/** ['dump.ndjson', '--replace'] -> { file: 'dump.ndjson', replace: true } */
function importArgs(args: readonly string[]): { file: string; replace: boolean } {
  let file: string | undefined
  let replace = false
  for (const arg of args) {
    if (arg === '--replace') replace = true
    else if (arg.startsWith('-') && arg !== '-') {
      throw new CommandError(`unknown argument ${JSON.stringify(arg)}; usage: ${IMPORT_USAGE}`, 2)
    } else if (file === undefined) file = arg
    else throw new CommandError(`one FILE only; usage: ${IMPORT_USAGE}`, EXIT.usage)
  }
  if (file === undefined || file === '') {
    throw new CommandError(`missing FILE; usage: ${IMPORT_USAGE}`, EXIT.usage)
  }
  return { file, replace }
}

export async function runImportCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  streams: CommandStreams,
): Promise<number> {
  if (asksForHelp(args)) {
    streams.stdout.write(IMPORT_HELP)
    return EXIT.ok
  }
  try {
    const { file, replace } = importArgs(args)
    const config = commandConfig(env, 'import')
    const now = Date.now()
    let source: ImportSource
    try {
      source = await readExportFile(
        file,
        config.maxDepth,
        new ArchiveRules(archiveLimits(config), now),
      )
    } catch (err) {
      if (err instanceof ExportFileError) throw new CommandError(`${file} ${err.message}`)
      const code = (err as NodeJS.ErrnoException).code
      if (typeof code === 'string') {
        throw new CommandError(`cannot read ${file}: ${code} ${(err as Error).message}`)
      }
      throw err
    }
    const progress = new Progress(streams.stderr, 'imported')
    const common = {
      replace,
      now,
      maxNotes: config.maxNotes,
      maxBytes: config.maxStoreBytes,
      fileLimits: fileLimits(config),
      onProgress: (notes: number) => progress.add(notes),
    }
    if (config.dataFile !== '') {
      await importIntoJournal(source, { ...common, path: config.dataFile })
    } else {
      const db = await openDatabase(config)
      try {
        await importIntoPostgres(db, source, {
          ...common,
          ...(userTokensOn(config)
            ? {
                maxNotesPerNotebook: config.maxNotesPerUser,
                maxBytesPerNotebook: config.maxBytesPerUser,
              }
            : {}),
        })
      } finally {
        await db.close()
      }
    }
    progress.done()
    const dropped = droppedLine(source.dropped)
    if (dropped !== undefined) streams.stderr.write(`notes-service import: ${dropped}\n`)
    return EXIT.ok
  } catch (err) {
    streams.stderr.write(`notes-service import: ${failureLine(err)}\n`)
    // ImportRefusedError and every other failure: 1, nothing changed.
    return err instanceof CommandError ? err.exitCode : EXIT.failed
  }
}

/**
 * What the store's limits let go, in one line, or undefined when it kept everything:
 * 'not kept, as this store's limits say: 3 past revisions beyond NOTE_HISTORY, 1 deleted note
 * past TRASH_DAYS.'
 */
function droppedLine(dropped: ArchiveDropped): string | undefined {
  const revisions = (count: number) => `${count} past revision${count === 1 ? '' : 's'}`
  const parts = [
    dropped.count > 0 ? `${revisions(dropped.count)} beyond NOTE_HISTORY` : '',
    dropped.age > 0 ? `${revisions(dropped.age)} older than HISTORY_DAYS` : '',
    dropped.bytes > 0 ? `${revisions(dropped.bytes)} beyond MAX_HISTORY_BYTES (the oldest)` : '',
    dropped.trash > 0
      ? `${dropped.trash} deleted note${dropped.trash === 1 ? '' : 's'} past TRASH_DAYS, with their revisions`
      : '',
  ].filter((part) => part !== '')
  if (parts.length === 0) return undefined
  return `imported; not kept, as this store's limits say: ${parts.join(', ')}.`
}
