import { createHash, randomBytes } from 'node:crypto'
import { type Dirent, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs'
import { type FileHandle, mkdir, open, rename, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { syncFolder, writeAll } from '../../durable/file-steps.js'
import { isFileId } from '../files.js'

/**
 * Where a journal's files lie on disk: a folder beside the journal, in it one folder per notebook
 * named by the SHA-256 of the notebook's name (a name is any text: never a path), in that one
 * file per id. '/data/notes.journal', notebook 'user:ann', file 9f86d0… ->
 * '/data/notes.journal.files/<sha256 of "user:ann">/9f86d0…'. An upload is written to a
 * temporary file in its notebook's folder ('3fa9c2d17b0e4a58.tmp') and renamed over its id's
 * name once fsynced, so a name never holds a torn file.
 */
export class FilesFolder {
  /** '/data/notes.journal.files' */
  readonly root: string
  /** Folders known to exist durably (made, and their parent fsynced). */
  readonly #made = new Set<string>()

  constructor(root: string) {
    this.root = root
  }

  /** The name of the folder of the notebook kept under this name: the hex SHA-256 of that name. */
  nameOf(notebook: string): string {
    return createHash('sha256').update(notebook).digest('hex')
  }

  /** The folder of the notebook kept under this name. */
  folderOf(notebook: string): string {
    return join(this.root, this.nameOf(notebook))
  }

  /** Where the file `id` of the notebook lies. */
  pathOf(notebook: string, id: string): string {
    return join(this.folderOf(notebook), id)
  }

  /** Makes the folder (and the root) if need be, their names fsynced into their parents. */
  async make(folder: string): Promise<void> {
    if (this.#made.has(folder)) return
    if (!this.#made.has(this.root)) {
      await mkdir(this.root, { recursive: true })
      await syncFolder(dirname(this.root))
      this.#made.add(this.root)
    }
    await mkdir(folder, { recursive: true })
    await syncFolder(this.root)
    this.#made.add(folder)
  }

  /** Removes a notebook's folder once empty; it stays when anything is left in it. */
  removeIfEmpty(folder: string): void {
    if (removeEmptyFolder(folder)) this.#made.delete(folder)
  }
}

/**
 * An upload on its way to disk: a temporary file written chunk by chunk, fsynced, then renamed
 * into place with its folder fsynced. Whatever happens, `discard` leaves no temporary file.
 */
export class TempFile {
  readonly path: string
  #handle: FileHandle | undefined
  #size = 0
  #moved = false

  private constructor(path: string, handle: FileHandle) {
    this.path = path
    this.#handle = handle
  }

  /** A new temporary file in `folder`. */
  static async open(folder: string): Promise<TempFile> {
    const path = join(folder, `${randomBytes(8).toString('hex')}.tmp`)
    return new TempFile(path, await open(path, 'wx'))
  }

  /** Appends `chunk`, resolving once the file system has all of it. */
  async write(chunk: Buffer): Promise<void> {
    await writeAll((this.#handle as FileHandle).fd, chunk, this.#size)
    this.#size += chunk.length
  }

  /** Fsyncs and closes the file: its bytes are on disk. */
  async seal(): Promise<void> {
    const handle = this.#handle as FileHandle
    await handle.sync()
    this.#handle = undefined
    await handle.close()
  }

  /** Renames the sealed file to `path` (replacing what is there) and fsyncs its folder. */
  async moveTo(path: string): Promise<void> {
    await rename(this.path, path)
    this.#moved = true
    await syncFolder(dirname(path))
  }

  /** Closes the file if open and removes it unless it was moved. */
  async discard(): Promise<void> {
    const handle = this.#handle
    this.#handle = undefined
    await handle?.close().catch(() => {})
    if (!this.#moved) await rm(this.path, { force: true }).catch(() => {})
  }
}

/** What the journal says a notebook's folder holds: its files' sizes by id. */
export type ExpectedFolder = ReadonlyMap<string, number>

/** A file the journal records that the folder does not hold as recorded. */
export interface FolderProblem {
  readonly path: string
  /** The bytes the journal records. */
  readonly size: number
  /** The bytes the file holds; undefined when it is missing. */
  readonly found: number | undefined
}

/**
 * Start-up's sweep of the files folder at `root`, against what the journal records (`expected`:
 * by notebook folder name, the files' sizes by id): temporary files (uploads a crash cut short)
 * and files no record names (a crash between a rename and its record, or after a removal's
 * record and before the unlink) are removed, and the folders left empty; names that are not the
 * store's are left alone. Answers the first recorded file that is missing or of another size.
 * @throws the file system's error when the folder cannot be read or cleaned
 */
export function sweepFolder(
  root: string,
  expected: ReadonlyMap<string, ExpectedFolder>,
): FolderProblem | undefined {
  const seen = new Set<string>()
  let problem: FolderProblem | undefined
  for (const entry of rootEntries(root)) {
    if (!entry.isDirectory() || !isFileId(entry.name)) continue
    const folder = join(root, entry.name)
    const files = expected.get(entry.name)
    for (const file of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, file.name)
      if (file.isFile() && file.name.endsWith('.tmp')) {
        rmSync(path, { force: true })
        continue
      }
      if (!file.isFile() || !isFileId(file.name)) continue
      const size = files?.get(file.name)
      if (size === undefined) {
        rmSync(path, { force: true })
        continue
      }
      seen.add(path)
      const found = statSync(path).size
      if (found !== size) problem ??= { path, size, found }
    }
    if (files === undefined) removeEmptyFolder(folder)
  }
  if (problem !== undefined) return problem
  for (const [name, files] of expected) {
    for (const [id, size] of files) {
      const path = join(root, name, id)
      if (!seen.has(path)) return { path, size, found: undefined }
    }
  }
  return undefined
}

/** Whether the folder at `root` holds a notebook's folder with anything in it. */
export function holdsFiles(root: string): boolean {
  return rootEntries(root).some(
    (entry) =>
      entry.isDirectory() && isFileId(entry.name) && readdirSync(join(root, entry.name)).length > 0,
  )
}

/** The entries of the root folder; none when it is absent (no file was ever stored). */
function rootEntries(root: string): Dirent[] {
  try {
    return readdirSync(root, { withFileTypes: true })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
}

/** Removes `folder` if it is empty; false when it is not (or is gone), which is left to start-up. */
function removeEmptyFolder(folder: string): boolean {
  try {
    rmdirSync(folder)
    return true
  } catch {
    return false
  }
}
