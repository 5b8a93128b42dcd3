import type { FilePage, FileRecord } from '../files.js'

/**
 * A page of a notebook's files from `records`, which are in the order stored (sequence order):
 * up to `limit` of those after the sequence `after`, and the cursor of the next page when more
 * follow. [s1, s2, s3, s4], limit 2, after s1 -> { files: [s2, s3], next: s3 }.
 */
export function filePage(
  records: Iterable<FileRecord>,
  limit: number,
  after: number | undefined,
): FilePage {
  const files: FileRecord[] = []
  let more = false
  for (const record of records) {
    if (after !== undefined && record.sequence <= after) continue
    if (files.length === limit) {
      more = true
      break
    }
    files.push(record)
  }
  return { files, next: more ? files[files.length - 1]?.sequence : undefined }
}
