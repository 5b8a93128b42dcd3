import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { syncDirectory } from '../../durable/file-steps.js'
import {
  checkImportCaps,
  type ImportCaps,
  ImportRefusedError,
  type ImportSource,
} from '../kernel/import-source.js'
import { etagOf, randomEpoch, versionToken } from '../kernel/version-token.js'
import type { ImageNote } from '../memory/records.js'
import { directoryRecords, imageRecords } from './journal-records.js'
import { JournaledNotebooks, notebookEpoch } from './journaled-notebooks.js'
import { encodeHeader } from './record-format.js'

export interface JournalImportOptions extends ImportCaps {
  /** The journal (DATA_FILE). */
  path: string
  /** Replace the notes it holds; without it, a journal that holds notes is refused. */
  replace: boolean
  /** The time the imported notes were last written (Last-Modified), in ms. */
  now: number
  /** Told of every chunk of notes written. */
  onProgress?: (notes: number) => void
}

/**
 * Imports `source` (an export) as a new journal at `path`, under the journal's lock, so a
 * running server (which holds it) is refused with one line: the snapshot is written to
 * `path.tmp`, fsynced, renamed over the journal, the directory fsynced, as a compaction writes
 * one, so a crash leaves the old journal or the new one, never a mix. The new journal has a new
 * epoch, so no version token or ETag of the old one matches the new contents; the notes keep their
 * order, ids and JSON, at positions 1..n, and later creates give ids above every imported one.
 * @throws ImportRefusedError (nothing changed): notes already there without `replace`, caps, or
 * a journal that cannot be opened
 */
export async function importIntoJournal(
  source: ImportSource,
  options: JournalImportOptions,
): Promise<void> {
  checkImportCaps(source, options)
  let store: JournaledNotebooks
  try {
    store = new JournaledNotebooks({
      path: options.path,
      maxNotes: options.maxNotes,
      maxBytes: options.maxBytes,
    })
  } catch (err) {
    throw new ImportRefusedError((err as Error).message)
  }
  try {
    const held = store.stats().notes
    const notebooks = [...store.directory.records()].filter((record) => record.t === 'notebook')
    if (notebooks.length > 0 && !options.replace) {
      throw new ImportRefusedError(
        `DATA_FILE ${options.path} holds ${notebooks.length} notebooks with their members; import into an empty store, or add --replace to replace them.`,
      )
    }
    if (held > 0 && !options.replace) {
      throw new ImportRefusedError(
        `DATA_FILE ${options.path} holds ${held} notes; import into an empty store, or add --replace to replace them.`,
      )
    }
    await writeJournal(source, options)
  } finally {
    await store.close()
  }
}

async function writeJournal(source: ImportSource, options: JournalImportOptions): Promise<void> {
  const epoch = randomEpoch()
  const counts = new Map(source.notebooks.map((notebook) => [notebook.name, notebook.notes]))
  const tmp = `${options.path}.tmp`
  const fd = openSync(tmp, 'w')
  try {
    const write = (frames: readonly Buffer[]) => {
      const bytes = frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames)
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done)
    }
    // Each notebook's image: its head (its notes count as its changes so far) then its notes, at
    // positions 1..n, so its version tokens and ETags are those of a notebook written n times.
    const headOf = (notebook: string) => {
      const sequence = counts.get(notebook) ?? 0
      return { sequence, historyStart: sequence, lastId: source.lastId, history: [], keys: [] }
    }
    write([encodeHeader(epoch)])
    // Who may see which notebook, before the notebooks' images, as a compaction writes it.
    if (source.directory.length > 0) write(directoryRecords(source.directory))
    let notebook: string | undefined
    let notebookEpochOf = ''
    let position = 0
    for await (const chunk of source.read()) {
      const frames: Buffer[] = []
      for (const note of chunk) {
        if (note.notebook !== notebook) {
          notebook = note.notebook
          notebookEpochOf = notebookEpoch(epoch, notebook)
          position = 0
          frames.push(...imageRecords({ ...headOf(notebook), notes: [] }, notebook))
        }
        position++
        const image: ImageNote = {
          json: note.json,
          etag: etagOf(versionToken(notebookEpochOf, position)),
          modified: options.now,
          position,
        }
        // The record of this note: an image of it alone, without its head (written once above),
        // so the journal's format stays written in one place.
        frames.push(...imageRecords({ ...headOf(notebook), notes: [image] }, notebook).slice(1))
      }
      write(frames)
      options.onProgress?.(chunk.length)
    }
    fsyncSync(fd)
  } catch (err) {
    closeSync(fd)
    rmSync(tmp, { force: true })
    throw err
  }
  closeSync(fd)
  renameSync(tmp, options.path)
  syncDirectory(options.path)
}
