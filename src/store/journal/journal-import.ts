import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { syncDirectory } from '../../durable/file-steps.js'
import {
  checkImportCaps,
  type ImportCaps,
  type ImportedNote,
  ImportRefusedError,
  type ImportSource,
} from '../kernel/import-source.js'
import { etagOf, randomEpoch, versionToken } from '../kernel/version-token.js'
import type { ImageNote, StoreImage } from '../memory/records.js'
import { placeFiles, sweepReplacedFiles } from './journal-import-files.js'
import { directoryRecords, imageRecords } from './journal-records.js'
import { JournaledNotebooks, notebookEpoch } from './journaled-notebooks.js'
import { encodeHeader } from './record-format.js'

export interface JournalImportOptions extends ImportCaps {
  /** The journal (DATA_FILE). */
  path: string
  /** Replace the notes it holds; without it, a journal that holds notes is refused. */
  replace: boolean
  /** The time the imported notes were last written (Last-Modified) when the file does not say, in ms. */
  now: number
  /** Told of every chunk of notes written. */
  onProgress?: (notes: number) => void
}

/**
 * Imports `source` (an export) as a new journal at `path`, under the journal's lock, so a
 * running server (which holds it) is refused with one line: the files' bytes are placed beside
 * it first (journal-import-files.ts), then the snapshot, the files' records last, is written to
 * `path.tmp`, fsynced, renamed over the journal, the directory fsynced, as a compaction writes
 * one, so a crash leaves the old journal or the new one, never a mix. The new journal has a new
 * epoch, so no version token or ETag of the old one matches the new contents; the notes keep their
 * order, ids, JSON, times and past states, and the trash its notes, each state at the sequence
 * the file gives it (noteSlots: a file without history puts its notes at positions 1..n), and
 * later creates give ids above every imported one; the files keep their ids, types, times and
 * order. The replaced journal's files go once the new
 * one is in force.
 * @throws ImportRefusedError (nothing changed): notes or files already there without `replace`, caps, or
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
    const trashed = store.trashedNotes()
    if (trashed > 0 && !options.replace) {
      throw new ImportRefusedError(
        `DATA_FILE ${options.path} holds ${trashed === 1 ? 'a deleted note' : `${trashed} deleted notes`} in its trash; import into an empty store, or add --replace to replace them.`,
      )
    }
    const files = store.files.totals().files
    if (files > 0 && !options.replace) {
      throw new ImportRefusedError(
        `DATA_FILE ${options.path} holds ${files === 1 ? 'a file' : `${files} files`}; import into an empty store, or add --replace to replace them.`,
      )
    }
    try {
      const tmp = await writeJournal(source, options, await placeFiles(options.path, source))
      try {
        renameSync(tmp, options.path)
      } catch (err) {
        rmSync(tmp, { force: true })
        throw err
      }
    } catch (err) {
      // What was placed is, to the journal still in force, files without a record: gone again.
      try {
        store.files.recover(false)
      } catch {
        // Left to start-up, which removes them as well.
      }
      throw err
    }
    syncDirectory(options.path)
    sweepReplacedFiles(options.path, source)
  } finally {
    await store.close()
  }
}

/** Writes the new journal to `path.tmp`, fsynced, the files' records last; answers that path. */
async function writeJournal(
  source: ImportSource,
  options: JournalImportOptions,
  files: readonly Buffer[],
): Promise<string> {
  const epoch = randomEpoch()
  const sequences = new Map(source.notebooks.map((notebook) => [notebook.name, notebook.sequence]))
  const tmp = `${options.path}.tmp`
  const fd = openSync(tmp, 'w')
  try {
    const write = (frames: readonly Buffer[]) => {
      const bytes = frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames)
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done)
    }
    // Each notebook's image: its head (the sequences its notes and trash take count as its changes
    // so far), then its notes and its trash, each state at its own sequence (noteSlots), so its
    // version tokens and ETags are those of a notebook written that many times.
    const headOf = (notebook: string): StoreImage => {
      const sequence = sequences.get(notebook) ?? 0
      return {
        sequence,
        historyStart: sequence,
        lastId: source.lastId,
        history: [],
        keys: [],
        notes: [],
      }
    }
    write([encodeHeader(epoch)])
    // Who may see which notebook, before the notebooks' images, as a compaction writes it.
    if (source.directory.length > 0) write(directoryRecords(source.directory))
    let notebook: string | undefined
    let notebookEpochOf = ''
    for await (const chunk of source.read()) {
      const frames: Buffer[] = []
      for (const note of chunk) {
        if (note.notebook !== notebook) {
          notebook = note.notebook
          notebookEpochOf = notebookEpoch(epoch, notebook)
          frames.push(...imageRecords(headOf(notebook), notebook))
        }
        const image = imageNote(note, notebookEpochOf, options.now)
        // The records of this note: an image of it alone, without its head (written once above),
        // so the journal's format stays written in one place.
        const alone =
          note.trashed === undefined
            ? { ...headOf(notebook), notes: [image] }
            : { ...headOf(notebook), trash: [{ note: image, ...note.trashed }] }
        frames.push(...imageRecords(alone, notebook).slice(1))
      }
      write(frames)
      options.onProgress?.(chunk.length)
    }
    if (files.length > 0) write(files)
    fsyncSync(fd)
  } catch (err) {
    closeSync(fd)
    rmSync(tmp, { force: true })
    throw err
  }
  closeSync(fd)
  return tmp
}

/** A note as the journal's image holds it, its versions tokens of `epoch`. */
function imageNote(note: ImportedNote, epoch: string, now: number): ImageNote {
  const image: ImageNote = {
    json: note.json,
    etag: etagOf(versionToken(epoch, note.written)),
    modified: note.modified ?? now,
    position: note.position,
  }
  if (note.change === 'updated') image.change = 'updated'
  if (note.past.length > 0) {
    image.past = note.past.map(({ sequence, at, change, json }) => ({
      version: versionToken(epoch, sequence),
      at,
      change,
      json,
    }))
  }
  return image
}
