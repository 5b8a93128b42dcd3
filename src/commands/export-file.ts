import { exceedsDepth } from '../api/json-depth.js'
import { parseJson } from '../client/parse-json.js'
import { type ArchiveRules, noneDropped, noteSlots } from '../store/kernel/import-archive.js'
import type { ImportedNote, ImportedNotebook, ImportSource } from '../store/kernel/import-source.js'
import { isNotebookName, SHARED_NOTEBOOK } from '../store/types.js'
import { DirectoryCheck, directoryCount } from './export-directory.js'
import { FilesCheck, filesCount } from './export-files.js'
import { historyCount } from './export-history.js'
import { linesOf } from './export-lines.js'
import { HistoryCheck, HistoryReread, type KeptPast } from './import-history.js'

/**
 * The file of `notes-service export` and `import`: every notebook of a store, each
 * note line exactly as GET /api/note with Accept: application/x-ndjson sends it.
 *   {"notes-service-export":1}
 *   {"notebook":"shared","notes":2}
 *   {"id":1700000000000,"title":"a"}
 *   {"id":1700000000001}
 *   {"notebook":"user:alice","notes":1}
 *   {"title":"no id: a merge patch removed it"}
 * After the first line, the notebooks' directory may follow (export-directory.ts); after the
 * last notebook's notes, the history and trash of every notebook may (export-history.ts), and
 * then the files of every notebook (export-files.ts), their bytes in base64:
 *   {"files":1}
 *   {"file":{"notebook":"user:alice","id":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5,"type":"text/plain","created":1700000000000}}
 *   "aGVsbG8="
 * A notebook line says how many note lines follow, so a note (any JSON object) is never taken for
 * one; a files line says how many files follow, and a file's line how many bytes, so neither is
 * taken for a notebook line. A file without the first line is an HTTP export: every line a note of
 * the shared notebook (and no files). A file of an older version, without history or files, reads
 * as before: its notes are each one create, made at the time of the import.
 */

const FORMAT_KEY = 'notes-service-export'
const FORMAT_VERSION = 1
export const HEADER_LINE = `{"${FORMAT_KEY}":${FORMAT_VERSION}}`

/** ('shared', 2) -> '{"notebook":"shared","notes":2}' */
export function notebookLine(name: string, notes: number): string {
  return JSON.stringify({ notebook: name, notes })
}

/** A file that is not a well-formed export; the message names the line: 'line 7: ...'. */
export class ExportFileError extends Error {
  constructor(line: number, problem: string) {
    super(`line ${line}: ${problem}`)
    this.name = 'ExportFileError'
  }
}

/** Notes handed to a store at once. */
const READ_CHUNK = 1000

/**
 * Reads the whole file at `path` and checks every line (each note a JSON object nested at most
 * `maxDepth` deep, the first line, each notebook line and its count, the history's lines, every
 * file's line, count, base64, size and SHA-256) before answering anything, so an import changes
 * nothing when a line is wrong; then `read()` goes over the notes again, each with its history,
 * and `fileBody` over a file's bytes (from where they start), as the store writes them, without
 * ever holding the file, or a file, whole. What the store keeps of the history and trash is what
 * `rules` (its limits, now) keep. Each note's JSON is written back as JSON.stringify writes it,
 * which is how the stores serialize notes: a line from an export is kept byte for byte, and one
 * edited by hand (spaces, escapes) is stored as the service would.
 * @throws ExportFileError naming the first bad line; the file system's error when it cannot be read
 */
export async function readExportFile(
  path: string,
  maxDepth: number,
  rules: ArchiveRules,
): Promise<ImportSource> {
  const counts = new Map<string, { notes: number; bytes: number }>()
  let notes = 0
  let bytes = 0
  let lastId = Number.NEGATIVE_INFINITY
  const directory = new DirectoryCheck()
  let files: FilesCheck | undefined
  let history: HistoryCheck | undefined
  let last = 0
  const newHistory = (count: number, start: number, listed: Listed) =>
    new HistoryCheck(count, start, listed, rules, maxDepth)
  for await (const entry of entries(path, maxDepth, newHistory)) {
    if (entry.kind === 'files') {
      files = entry.check
      continue
    }
    if (entry.kind === 'history') {
      history = entry.check
      continue
    }
    if (entry.kind === 'directory') {
      const problem = directory.add(entry.value)
      if (problem !== undefined) throw new ExportFileError(entry.number, problem)
      last = entry.number
      continue
    }
    if (entry.kind === 'notebook') {
      counts.set(entry.name, { notes: 0, bytes: 0 })
      continue
    }
    const count = counts.get(entry.note.notebook) as { notes: number; bytes: number }
    const size = Buffer.byteLength(entry.note.json)
    count.notes++
    count.bytes += size
    notes++
    bytes += size
    const { id } = entry.note
    if (Number.isSafeInteger(id) && (id as number) > lastId) lastId = id as number
  }
  const unowned = directory.finish()
  if (unowned !== undefined) throw new ExportFileError(last, unowned)
  const notebooks: ImportedNotebook[] = [...counts].map(([name, count]) => {
    const kept = history?.notebooks.get(name)
    return {
      name,
      ...count,
      trash: kept?.trash ?? 0,
      trashBytes: kept?.trashBytes ?? 0,
      sequence: kept?.sequence ?? count.notes,
    }
  })
  const sum = (of: (notebook: ImportedNotebook) => number) =>
    notebooks.reduce((total, notebook) => total + of(notebook), 0)
  return {
    directory: directory.records,
    notebooks,
    notes,
    bytes,
    trash: sum((notebook) => notebook.trash),
    trashBytes: sum((notebook) => notebook.trashBytes),
    historyBytes: history?.historyBytes ?? 0,
    dropped: history?.dropped ?? noneDropped(),
    lastId: Math.max(lastId, history?.lastId ?? Number.NEGATIVE_INFINITY),
    read: () =>
      reread(path, maxDepth, notes, history && new HistoryReread(path, history, rules, maxDepth)),
    files: files?.files ?? [],
    fileBody: (file) => (files as FilesCheck).reread(path, file),
  }
}

/**
 * The notes again, by chunks, checked once more (the file may have changed since), each notebook's
 * with its history (`history`, read alongside) and then its trash, every state placed in the
 * notebook's sequences (noteSlots).
 */
async function* reread(
  path: string,
  maxDepth: number,
  expected: number,
  history: HistoryReread | undefined,
): AsyncGenerator<readonly ImportedNote[]> {
  let chunk: ImportedNote[] = []
  let seen = 0
  /** The notebook whose notes are being read, its block's trash still owed, its last sequence. */
  let notebook = ''
  let trash = 0
  let hasBlock = false
  let last = 0
  const add = (note: ImportedNote) => {
    chunk.push(note)
    last = note.trashed?.sequence ?? note.written
  }
  /** The trash of the notebook read, after its notes. */
  const trashOf = async function* (): AsyncGenerator<readonly ImportedNote[]> {
    for (; trash > 0; trash--) {
      const deleted = await (history as HistoryReread).trashed()
      const slots = noteSlots(last, deleted.change, deleted.past.length, true)
      last = slots.deleted as number
      if (!deleted.kept) continue
      const { json, id, at, change } = deleted
      add({
        notebook,
        json,
        id,
        position: slots.position,
        written: slots.written,
        modified: at,
        change,
        past: keptPast(deleted.past, slots.past),
        trashed: { deleted: deleted.deleted, sequence: slots.deleted as number },
      })
      if (chunk.length >= READ_CHUNK) {
        yield chunk
        chunk = []
      }
    }
  }
  for await (const entry of entries(path, maxDepth)) {
    // The history and the files come after every note.
    if (entry.kind === 'files' || entry.kind === 'history') break
    if (entry.kind === 'notebook') {
      yield* trashOf()
      notebook = entry.name
      last = 0
      const block = await history?.block(notebook)
      hasBlock = block !== undefined
      trash = block?.trash ?? 0
      continue
    }
    if (entry.kind !== 'note') continue
    if (++seen > expected) break
    const state = hasBlock ? await (history as HistoryReread).state() : undefined
    const change = state?.change ?? 'created'
    const slots = noteSlots(last, change, state?.past.length ?? 0, false)
    add({
      ...entry.note,
      position: slots.position,
      written: slots.written,
      modified: state?.at,
      change,
      past: keptPast(state?.past ?? [], slots.past),
    })
    if (chunk.length >= READ_CHUNK) {
      yield chunk
      chunk = []
    }
  }
  if (seen !== expected) throw new Error('the file changed while it was being imported')
  yield* trashOf()
  if (chunk.length > 0) yield chunk
}

/** The past states kept, each at its sequence: ([a, undefined, b], [4, 5, 6]) -> [a@4, b@6]. */
function keptPast(past: readonly KeptPast[], sequences: readonly number[]) {
  return past.flatMap((state, i) =>
    state === undefined ? [] : [{ ...state, sequence: sequences[i] as number }],
  )
}

/** A note line: its notebook, its JSON, its id. */
type NoteLine = Pick<ImportedNote, 'notebook' | 'json' | 'id'>

/** The notebooks listed so far, in order, with their counts of notes. */
type Listed = ReadonlyMap<string, { index: number; notes: number }>

type Entry =
  | { readonly kind: 'directory'; readonly value: unknown; readonly number: number }
  | { readonly kind: 'notebook'; readonly name: string }
  | { readonly kind: 'note'; readonly note: NoteLine }
  /** The history section starts; its check has it all once the entries are done. */
  | { readonly kind: 'history'; readonly check: HistoryCheck | undefined }
  /** The files section starts; its check has every file once the entries are done. */
  | { readonly kind: 'files'; readonly check: FilesCheck }

/**
 * The file's notebooks and notes in order, each line checked; throws on the first bad one. With
 * `newHistory`, the history section's lines are checked by the check it makes; without, the
 * entries end at the history line (a second read, which reads the history apart).
 */
async function* entries(
  path: string,
  maxDepth: number,
  newHistory?: (count: number, start: number, listed: Listed) => HistoryCheck,
): AsyncGenerator<Entry> {
  let number = 0
  /** Whether the file has the first line; undefined until the first line is read. */
  let framed: boolean | undefined
  let notebook = SHARED_NOTEBOOK
  /** Note lines still owed by the last notebook line. */
  let owed = 0
  /** Whether the line read is the one after the first, where the directory may start. */
  let afterHeader = false
  /** Directory records still owed by the directory line. */
  let records = 0
  const names = new Map<string, { index: number; notes: number }>()
  let files: FilesCheck | undefined
  let history: HistoryCheck | undefined
  for await (const { text: line, next } of linesOf(path)) {
    number++
    if (framed === undefined) {
      framed = isHeader(line, number)
      if (framed) {
        afterHeader = true
        continue
      }
      yield { kind: 'notebook', name: SHARED_NOTEBOOK }
    }
    if (afterHeader) {
      afterHeader = false
      // The line after the first may start the directory.
      const count = directoryCount(parseLine(line))
      if (count !== undefined) {
        records = count
        continue
      }
    }
    if (records > 0) {
      records--
      const value = parseLine(line)
      if (value === NOT_JSON) throw new ExportFileError(number, 'not JSON.')
      yield { kind: 'directory', value, number }
      continue
    }
    if (files !== undefined) {
      const problem = files.add(line, number, next)
      if (problem !== undefined) throw new ExportFileError(number, problem)
      continue
    }
    if (history !== undefined && !history.done) {
      const problem = history.add(line, next)
      if (problem !== undefined) throw new ExportFileError(number, problem)
      continue
    }
    if (framed && owed === 0) {
      const value = parseLine(line)
      const count = filesCount(value)
      if (count !== undefined) {
        files = new FilesCheck(count)
        yield { kind: 'files', check: files }
        continue
      }
      if (history !== undefined) {
        throw new ExportFileError(
          number,
          'expected the files line, {"files":<count>}, or the end: the history comes after every notebook\'s notes.',
        )
      }
      const blocks = historyCount(value)
      if (blocks !== undefined) {
        if (newHistory === undefined) {
          yield { kind: 'history', check: undefined }
          return
        }
        history = newHistory(blocks, next, names)
        yield { kind: 'history', check: history }
        continue
      }
      const header = notebookHeader(line, number)
      if (names.has(header.name)) {
        throw new ExportFileError(
          number,
          `notebook ${JSON.stringify(header.name)} appears a second time.`,
        )
      }
      names.set(header.name, { index: names.size, notes: header.notes })
      notebook = header.name
      owed = header.notes
      yield { kind: 'notebook', name: notebook }
      continue
    }
    owed--
    yield { kind: 'note', note: noteOf(line, number, notebook, maxDepth) }
  }
  if (framed === undefined) yield { kind: 'notebook', name: SHARED_NOTEBOOK }
  if (records > 0) {
    throw new ExportFileError(number + 1, `the file ends ${records} directory records short.`)
  }
  if (owed > 0) {
    throw new ExportFileError(
      number + 1,
      `the file ends ${owed} note${owed === 1 ? '' : 's'} short of what the line of notebook ${JSON.stringify(notebook)} says.`,
    )
  }
  const unfinished = history?.finish()
  if (unfinished !== undefined) throw new ExportFileError(number + 1, unfinished)
  const short = files?.finish()
  if (short !== undefined) throw new ExportFileError(number + 1, short)
}

/** Whether the first line is the format's own; a line that names another version is refused. */
function isHeader(line: string, number: number): boolean {
  const value = parseLine(line)
  if (!isObject(value) || !Object.hasOwn(value, FORMAT_KEY)) return false
  const keys = Object.keys(value)
  if (keys.length !== 1) return false
  if (value[FORMAT_KEY] !== FORMAT_VERSION) {
    throw new ExportFileError(
      number,
      `an export of format ${JSON.stringify(value[FORMAT_KEY])}; this version reads format ${FORMAT_VERSION}.`,
    )
  }
  return true
}

function notebookHeader(line: string, number: number): { name: string; notes: number } {
  const value = parseLine(line)
  const expected = 'a notebook line, {"notebook":"<name>","notes":<count>}'
  if (!isObject(value)) throw new ExportFileError(number, `${expected}, is not a JSON object.`)
  const { notebook, notes } = value
  if (Object.keys(value).length !== 2 || typeof notebook !== 'string' || notebook === '') {
    throw new ExportFileError(number, `expected ${expected}.`)
  }
  if (!isNotebookName(notebook)) {
    throw new ExportFileError(number, 'a notebook name must be well-formed text without NUL.')
  }
  if (!Number.isSafeInteger(notes) || (notes as number) < 0) {
    throw new ExportFileError(
      number,
      `the count of notebook ${JSON.stringify(notebook)} must be a whole number of notes, 0 or more.`,
    )
  }
  return { name: notebook, notes: notes as number }
}

function noteOf(line: string, number: number, notebook: string, maxDepth: number): NoteLine {
  if (line.trim() === '') throw new ExportFileError(number, 'an empty line where a note should be.')
  if (exceedsDepth(line, maxDepth)) {
    throw new ExportFileError(number, `a note nested deeper than ${maxDepth} levels (MAX_DEPTH).`)
  }
  const value = parseLine(line)
  if (value === NOT_JSON) throw new ExportFileError(number, 'not JSON.')
  if (!isObject(value)) throw new ExportFileError(number, 'a note must be a JSON object.')
  return { notebook, json: JSON.stringify(value), id: value.id }
}

const NOT_JSON = Symbol('not JSON')

function parseLine(line: string): unknown {
  try {
    return parseJson(line)
  } catch {
    return NOT_JSON
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
