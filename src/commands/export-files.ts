import { createHash, type Hash } from 'node:crypto'
import type { Readable } from 'node:stream'
import { uploadType } from '../api/file-answers.js'
import { type FileRecord, type FileSpace, isFileId, type NotebookFiles } from '../store/files.js'
import type { ImportedFile } from '../store/kernel/import-source.js'
import { isNotebookName } from '../store/types.js'
import { linesOf } from './export-lines.js'

/*
 * The files in an export file, after every notebook's notes: a line {"files":<count>}, then for
 * each file a line naming it (its notebook, id, size, type and time) followed by its bytes as
 * lines of base64 (RFC 4648, with padding), each a JSON string of at most DATA_LINE_BYTES bytes,
 * so that no line is large whatever the file's size; an empty file has no data line.
 *   {"files":2}
 *   {"file":{"notebook":"shared","id":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5,"type":"text/plain","created":1700000000000}}
 *   "aGVsbG8="
 *   {"file":{"notebook":"user:ann","id":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":0,"type":"application/octet-stream","created":1700000000001}}
 * An import checks every byte against its file's size and id (its SHA-256) before it changes
 * anything, and reads the bytes again, from where its first data line starts, as it stores them.
 */

/** The bytes of a full data line: 48 KiB, as 65,536 characters of base64. */
const DATA_LINE_BYTES = 48 * 1024
const DATA_LINE_CHARS = (DATA_LINE_BYTES / 3) * 4

/** (2) -> '{"files":2}' */
function filesLine(count: number): string {
  return JSON.stringify({ files: count })
}

/** A file's line: '{"file":{"notebook":"shared","id":"2cf2...","size":5,...}}' */
function fileLine(notebook: string, record: FileRecord): string {
  const { id, size, type, created } = record
  return JSON.stringify({ file: { notebook, id, size, type, created } })
}

/** The count of a `{"files":N}` line, or undefined for any other line. */
export function filesCount(value: unknown): number | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const keys = Object.keys(value)
  if (keys.length !== 1 || keys[0] !== 'files') return undefined
  const count = (value as { files: unknown }).files
  return Number.isSafeInteger(count) && (count as number) >= 0 ? (count as number) : undefined
}

/** Files listed per call while an export gathers them. */
const LIST_PAGE = 1000

/**
 * Writes the files section of every file of `space` with `write` (awaited: backpressure): the
 * notebooks in code point order of their names (as their notes are), each one's files in the
 * order it lists them, each read with one `read` and cut into data lines as it streams, so no file
 * is ever whole in memory. Nothing at all when no notebook holds a file. Answers the files written.
 * @throws Error when a file is removed or changes size while it is read (export again)
 */
export async function writeFiles(
  space: FileSpace,
  write: (text: string) => Promise<void>,
): Promise<number> {
  const names = [...(await space.notebooks())].sort((a, b) =>
    Buffer.compare(Buffer.from(a), Buffer.from(b)),
  )
  // What each file is, gathered first for the count; a file's bytes are read only as written.
  const files: [notebook: string, record: FileRecord][] = []
  for (const notebook of names) {
    for await (const record of everyFile(space.files(notebook))) files.push([notebook, record])
  }
  if (files.length === 0) return 0
  await write(`${filesLine(files.length)}\n`)
  for (const [notebook, record] of files) {
    await write(`${fileLine(notebook, record)}\n`)
    const gone = `file ${record.id} of notebook ${JSON.stringify(notebook)} was removed or changed while it was exported; export again.`
    const stream = await space.files(notebook).read(record.id, 0, record.size)
    if (stream === undefined) throw new Error(gone)
    let bytes = 0
    for await (const line of dataLines(stream)) {
      bytes += line.bytes
      if (bytes > record.size) break
      await write(`"${line.base64}"\n`)
    }
    if (bytes !== record.size) throw new Error(gone)
  }
  return files.length
}

async function* everyFile(files: NotebookFiles): AsyncGenerator<FileRecord> {
  let after: number | undefined
  do {
    const page = await files.list(LIST_PAGE, after)
    yield* page.files
    after = page.next
  } while (after !== undefined)
}

/** A stream's bytes as base64 lines of DATA_LINE_BYTES each, the last one shorter. */
async function* dataLines(stream: Readable): AsyncGenerator<{ base64: string; bytes: number }> {
  const line = Buffer.allocUnsafe(DATA_LINE_BYTES)
  let filled = 0
  for await (const chunk of stream) {
    const piece = chunk as Buffer
    for (let at = 0; at < piece.length; ) {
      const copied = piece.copy(line, filled, at)
      at += copied
      filled += copied
      if (filled === DATA_LINE_BYTES) {
        yield { base64: line.toString('base64'), bytes: filled }
        filled = 0
      }
    }
  }
  if (filled > 0) yield { base64: line.toString('base64', 0, filled), bytes: filled }
}

/**
 * The bytes of a data line, or what is wrong with it: a JSON string of 1 to DATA_LINE_BYTES bytes
 * as base64, written as base64 writes them ('"aGVsbG8="' -> <68 65 6c 6c 6f>; '"aGVsbG9="', whose
 * last digit holds bits past the bytes, is not).
 */
function dataBytes(text: string): Buffer | string {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return 'this line is not JSON'
  }
  if (typeof value !== 'string' || value === '' || value.length > DATA_LINE_CHARS) {
    return 'this line is not such a string'
  }
  if (value.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(value)) {
    return 'this one is not base64 (A-Z, a-z, 0-9, + and /, padded with =)'
  }
  const bytes = Buffer.from(value, 'base64')
  if (bytes.toString('base64') !== value) {
    return 'this one is not base64 as base64 writes it (bits set past its last byte)'
  }
  return bytes
}

/** A file's header line as a file, or the problem with it. */
function fileHeader(text: string): ImportedFile | string {
  const expected =
    'expected a file line, {"file":{"notebook":"<name>","id":"<sha-256>","size":<bytes>,"type":"<media type>","created":<ms>}}'
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return `${expected}; this is not JSON.`
  }
  const object = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
  if (!object(value) || Object.keys(value).join() !== 'file' || !object(value.file)) {
    return `${expected}.`
  }
  const file = value.file
  const { notebook, id, size, type, created } = file
  if (Object.keys(file).sort().join() !== 'created,id,notebook,size,type') return `${expected}.`
  if (typeof notebook !== 'string' || notebook === '' || !isNotebookName(notebook)) {
    return 'a file names its notebook: well-formed text without NUL.'
  }
  if (typeof id !== 'string' || !isFileId(id)) {
    return 'a file id is the SHA-256 of its bytes in lowercase hex, 64 digits.'
  }
  if (!Number.isSafeInteger(size) || (size as number) < 0) {
    return `the size of file ${id} must be a whole number of bytes, 0 or more.`
  }
  const checked = typeof type === 'string' ? uploadType(type) : undefined
  if (checked === undefined || !('type' in checked) || checked.type !== type) {
    return `the type of file ${id} must be a media type as the service keeps it ("image/png").`
  }
  if (!Number.isSafeInteger(created) || (created as number) < 0) {
    return `the time of file ${id} must be a whole number of ms since 1970.`
  }
  return { notebook, id, size: size as number, type: checked.type, created: created as number }
}

/** The file whose data lines are being read. */
interface Reading {
  readonly file: ImportedFile
  readonly hash: Hash
  /** The number of its first data line, and its byte offset. */
  readonly first: number
  readonly start: number
  owed: number
}

/**
 * Checks a files section a line at a time, after its {"files":N} line: N files, each with a
 * well-formed header, named once per notebook, its data lines holding exactly its size in bytes
 * whose SHA-256 is its id. Hashes as it goes: no file is held.
 */
export class FilesCheck {
  /** The files checked whole, in file order. */
  readonly files: ImportedFile[] = []
  /** Where each file's data lines are in the export: bytes [start, end). */
  readonly #spans = new Map<ImportedFile, { start: number; end: number }>()
  readonly #count: number
  readonly #names = new Set<string>()
  #reading: Reading | undefined

  constructor(count: number) {
    this.#count = count
  }

  /** The line `text`, at line `number`, the line after it starting at byte `next`: its problem, if any. */
  add(text: string, number: number, next: number): string | undefined {
    const reading = this.#reading
    if (reading !== undefined) return this.#data(reading, text, number, next)
    if (this.files.length === this.#count) {
      return `the files line says ${this.#count} file${this.#count === 1 ? '' : 's'}, and this line is past the last of them.`
    }
    const file = fileHeader(text)
    if (typeof file === 'string') return file
    const name = `${file.notebook}\n${file.id}`
    if (this.#names.has(name)) {
      return `file ${file.id} of notebook ${JSON.stringify(file.notebook)} appears a second time.`
    }
    this.#names.add(name)
    const hash = createHash('sha256')
    if (file.size > 0) {
      this.#reading = { file, hash, first: number + 1, start: next, owed: file.size }
      return undefined
    }
    if (hash.digest('hex') !== file.id) {
      return `file ${file.id} has no bytes, so its id must be the SHA-256 of none.`
    }
    this.files.push(file)
    return undefined
  }

  /** Once every line is read: what the section still owes, if anything. */
  finish(): string | undefined {
    const reading = this.#reading
    if (reading !== undefined) {
      const { file, owed } = reading
      return `the file ends inside file ${file.id}: ${owed} of its ${file.size} bytes are missing.`
    }
    const short = this.#count - this.files.length
    if (short === 0) return undefined
    return `the file ends ${short} file${short === 1 ? '' : 's'} short of what its files line says.`
  }

  /** The bytes of `file` again, from the export at `path` (see bytesOf). */
  reread(path: string, file: ImportedFile): AsyncGenerator<Buffer> {
    return bytesOf(path, this.#spans.get(file) ?? { start: 0, end: 0 }, file)
  }

  #data(reading: Reading, text: string, number: number, next: number): string | undefined {
    const bytes = dataBytes(text)
    const { file } = reading
    if (typeof bytes === 'string') {
      const owed = `${reading.owed} of its bytes ${reading.owed === 1 ? 'is' : 'are'} still to come`
      return `expected a data line of file ${file.id} (${owed}), a JSON string of base64 of 1 to ${DATA_LINE_BYTES} bytes; ${bytes}.`
    }
    if (bytes.length > reading.owed) {
      return `this data line holds ${bytes.length - reading.owed} bytes more than the ${file.size} of file ${file.id}.`
    }
    reading.hash.update(bytes)
    reading.owed -= bytes.length
    if (reading.owed > 0) return undefined
    this.#reading = undefined
    const found = reading.hash.digest('hex')
    if (found !== file.id) {
      const lines =
        reading.first === number ? 'its data line' : `its data lines ${reading.first} to ${number}`
      return `the bytes of file ${file.id} (${lines}) have the SHA-256 ${found}, not their id: a data line was changed.`
    }
    this.files.push(file)
    this.#spans.set(file, { start: reading.start, end: next })
    return undefined
  }
}

/**
 * The bytes of `file` from its data lines, bytes `span` of the export at `path`, one data line at
 * a time, hashed as they come: bytes that are not those checked before (the export changed since)
 * throw before the last of them is handed on, so that no store keeps them.
 */
async function* bytesOf(
  path: string,
  span: { start: number; end: number },
  file: ImportedFile,
): AsyncGenerator<Buffer> {
  if (file.size === 0) return
  const changed = () => new Error(`file ${file.id} changed in the export while it was imported`)
  const hash = createHash('sha256')
  let owed = file.size
  for await (const { text } of linesOf(path, span)) {
    const bytes = dataBytes(text)
    if (typeof bytes === 'string' || bytes.length > owed) throw changed()
    hash.update(bytes)
    owed -= bytes.length
    if (owed === 0) {
      if (hash.digest('hex') !== file.id) throw changed()
      yield bytes
      return
    }
    yield bytes
  }
  throw changed()
}
