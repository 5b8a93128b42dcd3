import type { DirectoryRecord } from '../directory.js'
import { FILE_LIMIT_DEFAULTS, type FileLimits, type FileSpace } from '../files.js'
import type { ArchiveDropped } from './import-archive.js'

/**
 * What an import hands a store: the notebooks of a whole export file, checked, and
 * their notes read again a chunk at a time, so that a store learns everything it must refuse for
 * (a non-empty target, caps, names) before it changes anything, and never holds the file whole.
 */

/** A notebook of the file, in the file's order. */
export interface ImportedNotebook {
  /** 'shared', or 'user:<sub>'. */
  readonly name: string
  /** Its live notes. */
  readonly notes: number
  /** UTF-8 bytes of its notes' JSON. */
  readonly bytes: number
  /** The deleted notes of its trash that the store keeps, and their bytes. */
  readonly trash: number
  readonly trashBytes: number
  /** The sequences its notes and trash take (ImportedNote's are 1 to this): its version's. */
  readonly sequence: number
}

/** One past state of a note, as a store keeps it. */
interface ImportedRevision {
  /** Its place in the notebook's sequences (from 1: a store adds its own start). */
  readonly sequence: number
  /** When it was made, ms since 1970. */
  readonly at: number
  readonly change: 'created' | 'updated'
  readonly json: string
}

/**
 * One note, live or in the trash: its notebook, its JSON as the list holds it, and where its
 * states go in the notebook's sequences (each from 1, a store adding its own start: noteSlots).
 */
export interface ImportedNote {
  readonly notebook: string
  readonly json: string
  /** Its `id` field (a finite number is what a path id finds), undefined when it has none. */
  readonly id: unknown
  /** Its list position, the sequence of its create. */
  readonly position: number
  /** The sequence of its current state: its version, its ETag's. */
  readonly written: number
  /** When its current state was written (ms); undefined when the file does not say. */
  readonly modified: number | undefined
  readonly change: 'created' | 'updated'
  /** The past states the store keeps, oldest first. */
  readonly past: readonly ImportedRevision[]
  /** A note of the trash: when it was deleted (ms), and the sequence of its delete. */
  readonly trashed?: { readonly deleted: number; readonly sequence: number } | undefined
}

/** One file: its notebook and what its header says of it, its bytes checked against it. */
export interface ImportedFile {
  readonly notebook: string
  /** The lowercase hex SHA-256 of its bytes, which the file's bytes were checked to have. */
  readonly id: string
  readonly size: number
  readonly type: string
  /** When the store it was exported from first stored it, ms since 1970. */
  readonly created: number
}

export interface ImportSource {
  /**
   * Who may see which notebook: the records that rebuild the directory, checked (each notebook
   * before its members and invitations, every notebook with an owner); empty for a file without.
   */
  readonly directory: readonly DirectoryRecord[]
  readonly notebooks: readonly ImportedNotebook[]
  /** Live notes over every notebook. */
  readonly notes: number
  readonly bytes: number
  /** Deleted notes kept over every notebook, their bytes, and the bytes of every past revision kept. */
  readonly trash: number
  readonly trashBytes: number
  readonly historyBytes: number
  /** What the store's history and trash limits let go. */
  readonly dropped: ArchiveDropped
  /**
   * The highest id that is a safe integer, of the live notes and those of the trash, or
   * -Infinity: later creates give ids above it (ids are max(now, last + 1)). Other numeric ids
   * are held as a PATCH would hold them.
   */
  readonly lastId: number
  /**
   * Every note in file order, by chunks: each notebook's together, its live notes in list order,
   * then its trash, oldest delete first.
   */
  read(): AsyncIterable<readonly ImportedNote[]>
  /** Every file, in file order (each notebook's together, in the order it lists them). */
  readonly files: readonly ImportedFile[]
  /**
   * The bytes of one of `files`, read again from the file a line at a time, and checked again as
   * they come: bytes that no longer match the file's id or size throw before the last of them.
   */
  fileBody(file: ImportedFile): AsyncIterable<Buffer>
}

/** An import the store refuses; nothing was changed. The message is one line. */
export class ImportRefusedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ImportRefusedError'
  }
}

/** The caps an import must fit, as the running service would hold them. */
export interface ImportCaps {
  maxNotes: number
  maxBytes: number
  /** Per notebook (MAX_NOTES_PER_USER, MAX_BYTES_PER_USER), when user tokens are on. */
  maxNotesPerNotebook?: number | undefined
  maxBytesPerNotebook?: number | undefined
  /** The files' caps (MAX_FILE_BYTES, MAX_FILES_BYTES_PER_USER, MAX_FILES_BYTES); defaults. */
  fileLimits?: FileLimits | undefined
}

/**
 * Throws ImportRefusedError when the file's notes do not fit the caps:
 * 'The file holds 12 notes; MAX_NOTES allows 10.'
 */
export function checkImportCaps(source: ImportSource, caps: ImportCaps): void {
  // The trash counts toward the caps as live notes do.
  const inTrash = (count: number) => (count === 0 ? '' : ` (${count} of them in the trash)`)
  const notes = source.notes + source.trash
  if (notes > caps.maxNotes) {
    throw new ImportRefusedError(
      `The file holds ${notes} notes${inTrash(source.trash)}; MAX_NOTES allows ${caps.maxNotes}.`,
    )
  }
  const bytes = source.bytes + source.trashBytes
  if (bytes > caps.maxBytes) {
    throw new ImportRefusedError(
      `The file holds ${bytes} bytes of notes${inTrash(source.trash)}; MAX_STORE_BYTES allows ${caps.maxBytes}.`,
    )
  }
  for (const notebook of source.notebooks) {
    const { maxNotesPerNotebook, maxBytesPerNotebook } = caps
    const held = notebook.notes + notebook.trash
    const name = JSON.stringify(notebook.name)
    if (maxNotesPerNotebook !== undefined && held > maxNotesPerNotebook) {
      throw new ImportRefusedError(
        `Notebook ${name} holds ${held} notes${inTrash(notebook.trash)}; MAX_NOTES_PER_USER allows ${maxNotesPerNotebook}.`,
      )
    }
    const heldBytes = notebook.bytes + notebook.trashBytes
    if (maxBytesPerNotebook !== undefined && heldBytes > maxBytesPerNotebook) {
      throw new ImportRefusedError(
        `Notebook ${name} holds ${heldBytes} bytes of notes${inTrash(notebook.trash)}; MAX_BYTES_PER_USER allows ${maxBytesPerNotebook}.`,
      )
    }
  }
  checkFileCaps(source.files, caps.fileLimits ?? FILE_LIMIT_DEFAULTS)
}

/** The files' part of checkImportCaps: each file, each notebook's, and all of them together. */
function checkFileCaps(files: readonly ImportedFile[], limits: FileLimits): void {
  const byNotebook = new Map<string, number>()
  let bytes = 0
  for (const file of files) {
    if (file.size > limits.maxFileBytes) {
      throw new ImportRefusedError(
        `File ${file.id} of notebook ${JSON.stringify(file.notebook)} holds ${file.size} bytes; MAX_FILE_BYTES allows ${limits.maxFileBytes}.`,
      )
    }
    byNotebook.set(file.notebook, (byNotebook.get(file.notebook) ?? 0) + file.size)
    bytes += file.size
  }
  for (const [notebook, held] of byNotebook) {
    if (held > limits.maxNotebookBytes) {
      throw new ImportRefusedError(
        `Notebook ${JSON.stringify(notebook)} holds ${held} bytes of files; MAX_FILES_BYTES_PER_USER allows ${limits.maxNotebookBytes}.`,
      )
    }
  }
  if (bytes > limits.maxBytes) {
    throw new ImportRefusedError(
      `The file holds ${bytes} bytes of files; MAX_FILES_BYTES allows ${limits.maxBytes}.`,
    )
  }
}

/**
 * Puts every file of `source` into `space`, in file order, each streamed from the file and kept
 * with its `created`; told of each one put. A file the store keeps under another id or size than
 * its header's (the file changed since it was checked) throws.
 */
export async function putFiles(
  space: FileSpace,
  source: ImportSource,
  onFile?: (file: ImportedFile) => void,
): Promise<void> {
  for (const file of source.files) {
    const record = await space
      .files(file.notebook)
      .put(file.type, source.fileBody(file), { created: file.created })
    if (record.id !== file.id || record.size !== file.size) {
      throw new Error(`file ${file.id} changed while it was being imported`)
    }
    onFile?.(file)
  }
}
