import type { FileRecord } from '../files.js'
import { takeIn } from '../kernel/file-intake.js'
import type { ImportSource } from '../kernel/import-source.js'
import { FilesFolder, sweepFolder, TempFile } from './files-folder.js'
import { filesImage } from './journal-files.js'

/*
 * The files of an import into a journal (journal-import.ts), placed so that the import stays all
 * or nothing: every file's bytes go into the files folder (a temporary file, fsynced, renamed to
 * its id's name, the folder fsynced, as an upload's do) before the new journal, which holds their
 * records, is renamed over the old one. Until that rename the old journal is the one in force, and
 * what the import placed is, to it, files without a record: start-up removes those, and so does
 * the import when it fails. A name the old journal records holds the same bytes whichever wrote
 * them (a name is the SHA-256 of the bytes, in a folder per notebook), so placing one over it
 * changes nothing the old journal serves.
 */

/**
 * Writes the bytes of every file of `source` beside the journal at `path`, each streamed from the
 * export and checked again against its id and size; answers the records of the files index for
 * the new journal (none when the export holds no file): the files in export order, their
 * sequences 1..n, their types and times kept.
 * @throws the file system's error, or an Error when a file's bytes changed since they were checked
 */
export async function placeFiles(path: string, source: ImportSource): Promise<Buffer[]> {
  if (source.files.length === 0) return []
  const folders = new FilesFolder(`${path}.files`)
  const records: [string, FileRecord][] = []
  for (const file of source.files) {
    const folder = folders.folderOf(file.notebook)
    await folders.make(folder)
    const temp = await TempFile.open(folder)
    try {
      const { id, size } = await takeIn(
        source.fileBody(file),
        Number.POSITIVE_INFINITY,
        (chunk) => temp.write(chunk),
        () => {},
      )
      if (id !== file.id || size !== file.size) {
        throw new Error(`file ${file.id} changed while it was being imported`)
      }
      await temp.seal()
      await temp.moveTo(folders.pathOf(file.notebook, id))
    } finally {
      await temp.discard()
    }
    const { notebook, type, created } = file
    records.push([
      notebook,
      { id: file.id, size: file.size, type, created, sequence: records.length + 1 },
    ])
  }
  return filesImage(records.length, records)
}

/**
 * Once the new journal is in force: removes from the files folder what it does not record (the
 * replaced journal's files), as start-up would. A failure here is left to start-up.
 */
export function sweepReplacedFiles(path: string, source: ImportSource): void {
  const folders = new FilesFolder(`${path}.files`)
  const expected = new Map<string, Map<string, number>>()
  for (const file of source.files) {
    const name = folders.nameOf(file.notebook)
    let sizes = expected.get(name)
    if (sizes === undefined) {
      sizes = new Map()
      expected.set(name, sizes)
    }
    sizes.set(file.id, file.size)
  }
  try {
    sweepFolder(folders.root, expected)
  } catch {
    // Start-up sweeps the folder again, and stops at anything it cannot account for.
  }
}
