import { StoreFullError } from '../types.js'

/**
 * What a memory store holds and the most it may hold, and, for a notebook, the
 * capacity of the whole service it is part of (caps per user and overall). A write
 * asks for room first (roomForNote, roomForBytes), which throws and changes nothing when a cap
 * would be passed, and then records what it did (add). Every store has one of its own; the
 * notebooks of one service share the `whole`.
 */
/** What a caller refused for the service-wide caps is told: its own deletes may not be enough. */
export const SHARED_ROOM_ADVICE = 'Its room is shared by every notebook; try again later.'

/** What a caller refused for its own caps is told while its trash holds notes. */
export const TRASH_ROOM_ADVICE =
  'Delete notes, or empty the trash, to make room: deleted notes count until they leave it.'

/** The advice of a refusal by a byte cap that files hold room of too (a memory store's). */
const FILE_ROOM_ADVICE = {
  own: 'Delete notes or files to make room.',
  trash:
    'Delete notes or files, or empty the trash, to make room: deleted notes count until they leave it.',
  shared:
    'Its room is shared by every notebook: deleting notes or files frees it; try again later.',
} as const

export class Capacity {
  /** Notes held. */
  notes = 0
  /** UTF-8 bytes of the notes' JSON held. */
  bytes = 0
  /** Deleted notes in the trash, and their bytes: counted toward the caps as notes are. */
  trashNotes = 0
  trashBytes = 0
  /**
   * Bytes of files and unfinished uploads held beside the notes (a memory store's, in the same
   * memory), counted toward maxBytes: in the whole only, as notebooks' file caps are their own.
   */
  fileBytes = 0
  readonly maxNotes: number
  readonly maxBytes: number
  /** Who holds what, in a refusal's words: 'The store', 'This notebook', 'The service'. */
  readonly #holder: string
  /** What this capacity is a part of, whose caps hold too; undefined for a store of its own. */
  readonly #whole: Capacity | undefined

  constructor(maxNotes: number, maxBytes: number, holder: string, whole?: Capacity) {
    this.maxNotes = maxNotes
    this.maxBytes = maxBytes
    this.#holder = holder
    this.#whole = whole
  }

  /**
   * Throws StoreFullError unless one more note fits, here and in the whole; the error names the
   * cap that would be passed, the part's before the whole's, and nothing of other parts:
   * 'This notebook holds its maximum of 2 notes.', 'The service holds its maximum of 5 notes.'
   */
  roomForNote(): void {
    if (this.notes + this.trashNotes >= this.maxNotes) throw this.#full(`${this.maxNotes} notes`)
    this.#whole?.roomForNote()
  }

  /** Throws StoreFullError unless `bytes` more (fewer when negative) fit, here and in the whole. */
  roomForBytes(bytes: number): void {
    if (this.#held() + bytes > this.maxBytes) throw this.#fullOfBytes()
    this.#whole?.roomForBytes(bytes)
  }

  /**
   * Throws StoreFullError unless `bytes` more of files fit beside the notes, in the whole:
   * 'The store holds its maximum of 1024 bytes of notes and files.'
   */
  roomForFiles(bytes: number): void {
    if (this.#whole !== undefined) this.#whole.roomForFiles(bytes)
    else if (this.#held() + bytes > this.maxBytes) throw this.#fullOfBytes(true)
  }

  /** Records `bytes` more (fewer when negative) of files held beside the notes, in the whole. */
  addFiles(bytes: number): void {
    if (this.#whole !== undefined) this.#whole.addFiles(bytes)
    else this.fileBytes += bytes
  }

  /** Records `notes` more notes (1, 0 or -1) of `bytes` more bytes, here and in the whole. */
  add(notes: number, bytes: number): void {
    this.notes += notes
    this.bytes += bytes
    this.#whole?.add(notes, bytes)
  }

  /** Records `notes` more notes (1 or -1, or more) of `bytes` more bytes in the trash. */
  trash(notes: number, bytes: number): void {
    this.trashNotes += notes
    this.trashBytes += bytes
    this.#whole?.trash(notes, bytes)
  }

  /** Bytes counted toward maxBytes: notes, the trash's and files'. */
  #held(): number {
    return this.bytes + this.trashBytes + this.fileBytes
  }

  /** The byte cap's refusal; it names files too once they hold some of its room (or would). */
  #fullOfBytes(files = this.fileBytes > 0): StoreFullError {
    if (!files) return this.#full(`${this.maxBytes} bytes of notes`)
    const message = `${this.#holder} holds its maximum of ${this.maxBytes} bytes of notes and files.`
    const { own, trash, shared } = FILE_ROOM_ADVICE
    if (this.#holder === 'The service') return new StoreFullError(message, shared)
    return new StoreFullError(message, this.trashNotes > 0 ? trash : own)
  }

  #full(what: string): StoreFullError {
    const message = `${this.#holder} holds its maximum of ${what}.`
    // The whole is shared: deleting one's own notes may not be enough, nor one's to do.
    return this.#holder === 'The service'
      ? new StoreFullError(message, SHARED_ROOM_ADVICE)
      : new StoreFullError(message, this.trashNotes > 0 ? TRASH_ROOM_ADVICE : undefined)
  }
}
