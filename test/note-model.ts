import type { NoteFields } from '../src/store/types.js'

/**
 * The obviously-correct model of the contract that property tests compare against:
 * a plain array scanned linearly, objects copied with spread, JSON.stringify on every read.
 */
export class NoteModel {
  notes: NoteFields[] = []
  lastId = 0

  constructor(private readonly now: () => number) {}

  create(fields: NoteFields): string {
    let id = Math.max(this.now(), this.lastId + 1)
    while (this.notes.some((note) => note.id === id)) id++
    this.lastId = id
    const note = { ...fields, id }
    this.notes.push(note)
    return JSON.stringify(note)
  }

  list(): string {
    return JSON.stringify(this.notes)
  }

  get(id: number): string | undefined {
    const note = this.notes.find((n) => n.id === id)
    return note === undefined ? undefined : JSON.stringify(note)
  }

  update(id: number, fields: NoteFields): string | undefined {
    const at = this.notes.findIndex((n) => n.id === id)
    if (at === -1) return undefined
    const merged: NoteFields = { ...this.notes[at] }
    for (const [key, value] of Object.entries(fields)) {
      Object.defineProperty(merged, key, {
        value,
        writable: true,
        enumerable: true,
        configurable: true,
      })
    }
    // What comes back from the store is JSON, so the model keeps the JSON round trip too.
    this.notes[at] = JSON.parse(JSON.stringify(merged)) as NoteFields
    return JSON.stringify(merged)
  }

  delete(id: number): boolean {
    const at = this.notes.findIndex((n) => n.id === id)
    if (at === -1) return false
    this.notes.splice(at, 1)
    return true
  }
}
