import type { Config } from '../config/config.js'
import { asksForHelp } from '../config/help.js'
import { archiveLimits, openDatabase, openJournal } from '../open-stores.js'
import type { DirectoryRecord } from '../store/directory.js'
import { ArchiveRules, type NotebookArchive } from '../store/kernel/import-archive.js'
import { memoryArchive } from '../store/memory/export-archive.js'
import { notebookArchive } from '../store/postgres/export-archive.js'
import { ExportSnapshot } from '../store/postgres/export-snapshot.js'
import { PostgresFiles } from '../store/postgres/files.js'
import {
  CommandError,
  type CommandStreams,
  commandConfig,
  EXIT,
  failureLine,
  Output,
  Progress,
} from './command-io.js'
import { directoryLine } from './export-directory.js'
import { HEADER_LINE, notebookLine } from './export-file.js'
import { writeFiles } from './export-files.js'
import { writeHistory } from './export-history.js'

/**
 * `notes-service export [--out FILE]`: every notebook of the configured store
 * (DATA_FILE or DATABASE_URL), its notes as one consistent snapshot and then its files, in the
 * export file format (export-file.ts), to FILE or stdout, without the HTTP server.
 */

const EXPORT_USAGE = 'notes-service export [--out FILE]'

/** What `notes-service export --help` prints. */
export const EXPORT_HELP = `Usage: ${EXPORT_USAGE}

Writes every notebook of the store that DATA_FILE or DATABASE_URL names, as one consistent
snapshot, in the export format (a first line {"notes-service-export":1}, then per notebook a line
naming it and its notes, one per line, then every note's history and every notebook's trash, then
every notebook's files, their bytes in base64),
without starting the HTTP server. A DATA_FILE in use by a running service is refused: export that
over HTTP (GET /api/note, Accept: application/x-ndjson).

  --out FILE, --out=FILE
      the file to write, made whole or not at all (written to FILE.partial, then renamed);
      without --out, or with --out -, stdout
  --help, -h
      print this help and exit

Reads DATA_FILE or DATABASE_URL (and the other settings) from the environment, as the service
does. Exit codes: 0 done, 1 failed (one line on stderr), 2 a usage error or a bad setting.
`

/** '--out', 'a.ndjson' -> 'a.ndjson'; [] -> undefined (stdout); '--out=-' -> undefined. */
function exportArgs(args: readonly string[]): string | undefined {
  let out: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    let value: string | undefined
    if (arg === '--out') value = args[++i]
    else if (arg.startsWith('--out=')) value = arg.slice('--out='.length)
    else {
      throw new CommandError(`unknown argument ${JSON.stringify(arg)}; usage: ${EXPORT_USAGE}`, 2)
    }
    if (value === undefined || value === '') {
      throw new CommandError(`--out needs a file name; usage: ${EXPORT_USAGE}`, EXIT.usage)
    }
    out = value === '-' ? undefined : value
  }
  return out
}

export async function runExportCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  streams: CommandStreams,
): Promise<number> {
  if (asksForHelp(args)) {
    streams.stdout.write(EXPORT_HELP)
    return EXIT.ok
  }
  let output: Output | undefined
  try {
    const out = exportArgs(args)
    const config = commandConfig(env, 'export')
    output = new Output(out, streams.stdout)
    await output.open()
    const progress = new Progress(streams.stderr, 'exported')
    await (config.dataFile !== ''
      ? exportJournal(config, output, progress)
      : exportDatabase(config, output, progress))
    await output.finish()
    progress.done()
    return EXIT.ok
  } catch (err) {
    await output?.abandon()
    streams.stderr.write(`notes-service export: ${failureLine(err)}\n`)
    return err instanceof CommandError ? err.exitCode : EXIT.failed
  }
}

/**
 * The directory's line and records, when the store has any (user tokens were on). A membership's
 * start is a version token of this store, which an import's new epochs make meaningless: not
 * written.
 */
async function writeDirectory(output: Output, records: readonly DirectoryRecord[]): Promise<void> {
  if (records.length === 0) return
  const lines = [
    directoryLine(records.length),
    ...records.map((record) => {
      if (record.t !== 'role') return JSON.stringify(record)
      const { t, id, user, role } = record
      return JSON.stringify({ t, id, user, role })
    }),
  ]
  await output.write(`${lines.join('\n')}\n`)
}

/** What an export keeps of the store's history and trash: what its limits show now. */
function exportRules(config: Config): ArchiveRules {
  return new ArchiveRules(archiveLimits(config), Date.now())
}

/**
 * Every notebook that holds notes or a trash, in name order, then their history and trash, then
 * every file: the journal is locked, so nothing writes meanwhile.
 */
async function exportJournal(config: Config, output: Output, progress: Progress): Promise<void> {
  const journal = openJournal(config)
  try {
    const rules = exportRules(config)
    await output.write(`${HEADER_LINE}\n`)
    await writeDirectory(output, [...journal.directory.records()])
    const archives: NotebookArchive[] = []
    for (const notebook of journal.notebooksHeld()) {
      const snapshot = notebook.exportNotes()
      await output.write(`${notebookLine(notebook.notebook, snapshot.count)}\n`)
      for await (const chunk of snapshot.chunks()) {
        await output.write(`${chunk.join('\n')}\n`)
        progress.add(chunk.length)
      }
      archives.push(memoryArchive(notebook.notebook, notebook.memory, rules))
    }
    await writeHistory(archives, (text) => output.write(text))
    await writeFiles(journal.files, (text) => output.write(text))
  } finally {
    await journal.close()
  }
}

/**
 * Every notebook in one REPEATABLE READ snapshot, the notes (then their history and trash) being
 * the database's at one moment; then the files, read after that snapshot ends, as they are then. That is enough: a file never
 * changes under its id, so each one is exported whole and exact; one uploaded meanwhile is there
 * though no note of the export refers to it (the service removes it after its grace), and one
 * deleted meanwhile is missing though a note may name it, as if deleted just after the export.
 */
async function exportDatabase(config: Config, output: Output, progress: Progress): Promise<void> {
  const db = await openDatabase(config)
  try {
    const snapshot = await ExportSnapshot.begin(db)
    try {
      const rules = exportRules(config)
      await output.write(`${HEADER_LINE}\n`)
      await writeDirectory(output, await snapshot.directory())
      const notebooks = await snapshot.notebooks(
        rules.limits.trashMs > 0 ? rules.now - rules.limits.trashMs : Number.MAX_SAFE_INTEGER,
      )
      for (const notebook of notebooks) {
        await output.write(`${notebookLine(notebook.notebook, notebook.notes)}\n`)
        let written = 0
        for await (const chunk of snapshot.chunks(notebook.notebook)) {
          await output.write(`${chunk.join('\n')}\n`)
          written += chunk.length
          progress.add(chunk.length)
        }
        if (written !== notebook.notes) {
          throw new Error(
            `notebook ${JSON.stringify(notebook.notebook)} counts ${notebook.notes} notes but holds ${written}`,
          )
        }
      }
      const archives: NotebookArchive[] = []
      for (const notebook of notebooks)
        archives.push(await notebookArchive(snapshot, notebook, rules))
      await writeHistory(archives, (text) => output.write(text))
    } finally {
      await snapshot.end()
    }
    await writeFiles(new PostgresFiles(db), (text) => output.write(text))
  } finally {
    await db.close()
  }
}
