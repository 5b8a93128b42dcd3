import { asksForHelp } from '../config/help.js'
import { userTokensOn } from '../config/load-config.js'
import { openDatabase } from '../open-stores.js'
import { importIntoJournal } from '../store/journal/journal-import.js'
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
 * `notes-service import FILE [--replace]`: the notes of an export file (or of an
 * HTTP export, into the shared notebook) into the configured store (DATA_FILE or DATABASE_URL),
 * without the HTTP server. The whole file is checked first; a store that holds notes is refused
 * without --replace; either way nothing changes unless everything is imported.
 */

const IMPORT_USAGE = 'notes-service import FILE [--replace]'

/** What `notes-service import --help` prints. */
export const IMPORT_HELP = `Usage: ${IMPORT_USAGE}

Reads FILE, an export (of notes-service export, or of the HTTP export, which goes into the shared
notebook), into the store that DATA_FILE or DATABASE_URL names, without starting the HTTP server.
The whole file is checked first; nothing changes unless all of it is imported. A DATA_FILE in use
by a running service is refused.

  FILE
      the export file to read
  --replace
      replace every notebook the store holds; without it, a store that holds notes is refused
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
    let source: ImportSource
    try {
      source = await readExportFile(file, config.maxDepth)
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
      now: Date.now(),
      maxNotes: config.maxNotes,
      maxBytes: config.maxStoreBytes,
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
    return EXIT.ok
  } catch (err) {
    streams.stderr.write(`notes-service import: ${failureLine(err)}\n`)
    // ImportRefusedError and every other failure: 1, nothing changed.
    return err instanceof CommandError ? err.exitCode : EXIT.failed
  }
}
