import {
  type ArchiveRules,
  type ExportedState,
  keptPast,
  type NotebookArchive,
} from '../kernel/import-archive.js'
import type { MemoryNoteStore } from './memory-store.js'
import type { ImageNote } from './records.js'

/**
 * What an export writes of a memory store's history and trash (NotebookArchive), from its image
 * (a journal's, which is locked while it is exported, so nothing writes meanwhile): each live note's
 * state, in list order, with the past revisions `rules` keep, then the trash within its time,
 * oldest delete first.
 */
export function memoryArchive(
  name: string,
  memory: MemoryNoteStore,
  rules: ArchiveRules,
): NotebookArchive {
  const image = memory.image()
  const trash = (image.trash ?? []).filter((item) => rules.inTrash(item.deleted))
  const stateOf = (note: ImageNote): ExportedState => ({
    at: note.modified,
    change: note.change ?? 'created',
    past: keptPast(note.past ?? [], rules),
  })
  return {
    name,
    notes: image.notes.length,
    trash: trash.length,
    async *states() {
      for (const note of image.notes) yield stateOf(note)
    },
    async *trashed() {
      for (const { note, deleted } of trash) yield { ...stateOf(note), deleted, json: note.json }
    },
  }
}
