import type { FileRecord, FileSpace } from '../files.js'
import type { MaybePromise, NoteStore } from '../types.js'

/*
 * The removal of files no note refers to. A note refers to a file when any string in it, at any
 * depth, contains the file's id (its 64 lowercase hex digits); a note in the trash counts, so
 * that a note put back finds its files. A file that no note of its notebook refers to goes once
 * the grace has passed since its upload (its last, when its bytes were uploaded again) and since
 * the last sweep that saw it referred to.
 *
 * What a sweep saw referred to is remembered by this process only: after a restart, a file that
 * no note refers to is kept at least the grace from the start-up (never removed early: a
 * reference may have gone just before the restart). A sweep reads a notebook's notes only when it
 * holds a file past its grace, and again only once the notebook has changed; it removes nothing
 * from a notebook written while it read it (the next sweep decides).
 */

/** A 64-digit run of lowercase hex, or a longer one, whose every 64-digit part may be an id. */
const HEX_RUN = /[0-9a-f]{64,}/g

/** Adds every file id that `json` contains to `ids`. */
export function collectIds(json: string, ids: Set<string>): void {
  for (const [run] of json.matchAll(HEX_RUN)) {
    for (let at = 0; at + 64 <= run.length; at++) ids.add(run.slice(at, at + 64))
  }
}

export interface FileSweepOptions {
  readonly space: FileSpace
  /** The notes of the notebook kept under this name (Notebooks.notebook). */
  readonly notesOf: (notebook: string) => NoteStore
  /** How long a file no note refers to is kept, in ms (FILE_GRACE_HOURS). */
  readonly graceMs: number
  readonly now?: () => number
}

/**
 * What one notebook's notes referred to when last read, and when: its version and the count of
 * its trash (a purge changes no version, but only a delete, which does, adds to the trash).
 */
interface Reading {
  readonly when: string
  readonly ids: ReadonlySet<string>
}

/** Where a notebook's notes and trash stand: 'k2x9q1.5 3'. */
async function whenOf(notes: NoteStore): Promise<string> {
  const [version, trash] = await Promise.all([notes.version(), notes.trash(1, undefined)])
  return `${version} ${trash.total}`
}

export class FileSweeper {
  readonly #options: FileSweepOptions
  readonly #now: () => number
  readonly #started: number
  /** When a sweep last saw each file referred to, by notebook, then id. */
  readonly #seen = new Map<string, Map<string, number>>()
  readonly #readings = new Map<string, Reading>()
  #running: Promise<number> | undefined

  constructor(options: FileSweepOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#started = this.#now()
  }

  /** Sweeps every notebook that holds files; answers how many files it removed. One at a time. */
  sweep(): Promise<number> {
    this.#running ??= this.#sweepAll().finally(() => {
      this.#running = undefined
    })
    return this.#running
  }

  async #sweepAll(): Promise<number> {
    let removed = 0
    const notebooks = await this.#options.space.notebooks()
    for (const notebook of notebooks) removed += await this.#sweepNotebook(notebook)
    for (const notebook of [...this.#seen.keys()]) {
      if (!notebooks.includes(notebook)) {
        this.#seen.delete(notebook)
        this.#readings.delete(notebook)
      }
    }
    return removed
  }

  async #sweepNotebook(notebook: string): Promise<number> {
    const { space, notesOf, graceMs } = this.#options
    const files = space.files(notebook)
    const now = this.#now()
    const due: FileRecord[] = []
    for await (const file of allFiles(files.list.bind(files))) {
      if (now - this.#putAt(file) >= graceMs) due.push(file)
    }
    if (due.length === 0) return 0
    const notes = notesOf(notebook)
    const reading = await this.#read(notebook, notes)
    const seen = this.#seen.get(notebook) ?? new Map<string, number>()
    this.#seen.set(notebook, seen)
    let removed = 0
    for (const file of due) {
      if (reading.ids.has(file.id)) {
        seen.set(file.id, now)
        continue
      }
      const since = Math.max(this.#putAt(file), seen.get(file.id) ?? 0)
      if (now - since < graceMs) continue
      // A write since the reading may refer to it: the next sweep reads the notes again.
      if ((await whenOf(notes)) !== reading.when) break
      if (await files.delete(file.id)) removed += 1
      seen.delete(file.id)
    }
    return removed
  }

  /** Where the file's grace starts but for references: its last upload, or the start-up. */
  #putAt(file: FileRecord): number {
    return Math.max(file.created, file.touched ?? 0, this.#started)
  }

  /** The ids the notebook's notes and trash contain, read again only when it has changed. */
  async #read(notebook: string, notes: NoteStore): Promise<Reading> {
    const when = await whenOf(notes)
    const known = this.#readings.get(notebook)
    if (known?.when === when) return known
    const ids = new Set<string>()
    const snapshot = await notes.exportNotes()
    try {
      for await (const chunk of snapshot.chunks()) for (const json of chunk) collectIds(json, ids)
    } finally {
      await snapshot.close()
    }
    let after: number | undefined
    for (;;) {
      const page = await notes.trash(1000, after)
      for (const trashed of page.notes) collectIds(trashed.json, ids)
      if (page.next === undefined) break
      after = page.next
    }
    const reading = { when, ids }
    this.#readings.set(notebook, reading)
    return reading
  }
}

/** Every file of a notebook, a page at a time. */
async function* allFiles(
  list: (
    limit: number,
    after?: number,
  ) => MaybePromise<{
    files: readonly FileRecord[]
    next: number | undefined
  }>,
): AsyncGenerator<FileRecord> {
  let after: number | undefined
  for (;;) {
    const page = await list(1000, after)
    yield* page.files
    if (page.next === undefined) return
    after = page.next
  }
}
