import type { FileLimits, FileSpace } from '../files.js'
import type { Notebooks, NoteStore } from '../types.js'
import type { UploadStaging } from '../uploads.js'
import { MemoryFiles } from './memory-files.js'
import { MemoryNotebooks } from './memory-notebooks.js'
import { MemoryNoteStore } from './memory-store.js'
import { MemoryUploads } from './memory-uploads.js'

/**
 * Files and resumable uploads in memory beside the notes: with a memory store (or memory
 * notebooks) they count toward its byte cap, in the same memory as its notes; beside any other
 * store, toward the caps of files alone. `limits`: the caps of files of a store given alone.
 */
export function memoryFileStores(
  { store, notebooks }: { store?: NoteStore | undefined; notebooks?: Notebooks | undefined },
  limits: Partial<FileLimits> = {},
): { files: FileSpace; uploads: UploadStaging } {
  if (notebooks instanceof MemoryNotebooks) {
    return { files: notebooks.files, uploads: notebooks.uploads }
  }
  if (store instanceof MemoryNoteStore) {
    const room = store.fileRoom()
    const files = new MemoryFiles({ ...limits, room })
    return { files, uploads: new MemoryUploads({ room, files: files.uploadRoom }) }
  }
  const files = new MemoryFiles(limits)
  return { files, uploads: new MemoryUploads({ files: files.uploadRoom }) }
}
