import { createReadStream } from 'node:fs'
import { exceedsDepth } from '../api/json-depth.js'
import { parseJson } from '../client/parse-json.js'
import type { ImportedNote, ImportedNotebook, ImportSource } from '../store/kernel/import-source.js'
import { isNotebookName, SHARED_NOTEBOOK } from '../store/types.js'
import { DirectoryCheck, directoryCount } from './export-directory.js'

/**
 * The file of `notes-service export` and `import`: every notebook of a store, each
 * note line exactly as GET /api/note with Accept: application/x-ndjson sends it.
 *   {"notes-service-export":1}
 *   {"notebook":"shared","notes":2}
 *   {"id":1700000000000,"title":"a"}
 *   {"id":1700000000001}
 *   {"notebook":"user:alice","notes":1}
 *   {"title":"no id: a merge patch removed it"}
 * After the first line, the notebooks' directory may follow (export-directory.ts).
 * A notebook line says how many note lines follow, so a note (any JSON object) is never taken for
 * one. A file without the first line is an HTTP export: every line a note of the shared notebook.
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
 * `maxDepth` deep, the first line, each notebook line and its count) before answering anything, so
 * an import changes nothing when a line is wrong; then `read()` goes over the notes again, as the
 * store writes them, without ever holding the file whole. Each note's JSON is written back as
 * JSON.stringify writes it, which is how the stores serialize notes: a line from an export is
 * kept byte for byte, and one edited by hand (spaces, escapes) is stored as the service would.
 * @throws ExportFileError naming the first bad line; the file system's error when it cannot be read
 */
export async function readExportFile(path: string, maxDepth: number): Promise<ImportSource> {
  const counts = new Map<string, { notes: number; bytes: number }>()
  let notes = 0
  let bytes = 0
  let lastId = Number.NEGATIVE_INFINITY
  const directory = new DirectoryCheck()
  let last = 0
  for await (const entry of entries(path, maxDepth)) {
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
  const notebooks: ImportedNotebook[] = [...counts].map(([name, count]) => ({ name, ...count }))
  return {
    directory: directory.records,
    notebooks,
    notes,
    bytes,
    lastId,
    read: () => reread(path, maxDepth, notes),
  }
}

/** The notes again, by chunks, checked once more (the file may have changed since). */
async function* reread(
  path: string,
  maxDepth: number,
  expected: number,
): AsyncGenerator<readonly ImportedNote[]> {
  let chunk: ImportedNote[] = []
  let seen = 0
  for await (const entry of entries(path, maxDepth)) {
    if (entry.kind !== 'note') continue
    if (++seen > expected) break
    chunk.push(entry.note)
    if (chunk.length === READ_CHUNK) {
      yield chunk
      chunk = []
    }
  }
  if (seen !== expected) throw new Error('the file changed while it was being imported')
  if (chunk.length > 0) yield chunk
}

type Entry =
  | { readonly kind: 'directory'; readonly value: unknown; readonly number: number }
  | { readonly kind: 'notebook'; readonly name: string }
  | { readonly kind: 'note'; readonly note: ImportedNote }

/** The file's notebooks and notes in order, each line checked; throws on the first bad one. */
async function* entries(path: string, maxDepth: number): AsyncGenerator<Entry> {
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
  const names = new Set<string>()
  for await (const line of lines(path)) {
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
    if (framed && owed === 0) {
      const header = notebookHeader(line, number)
      if (names.has(header.name)) {
        throw new ExportFileError(
          number,
          `notebook ${JSON.stringify(header.name)} appears a second time.`,
        )
      }
      names.add(header.name)
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

function noteOf(line: string, number: number, notebook: string, maxDepth: number): ImportedNote {
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

/**
 * The file's lines, split at '\n' only, as UTF-8; the last may lack its '\n'. A file that ends
 * with '\n' has no empty last line: 'a\nb\n' -> 'a', 'b'; 'a\nb' -> 'a', 'b'.
 */
async function* lines(path: string): AsyncGenerator<string> {
  let rest = ''
  for await (const chunk of createReadStream(path, { encoding: 'utf8', highWaterMark: 1 << 20 })) {
    const text = rest + (chunk as string)
    let start = 0
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      yield text.slice(start, end)
      start = end + 1
    }
    rest = text.slice(start)
  }
  if (rest !== '') yield rest
}
