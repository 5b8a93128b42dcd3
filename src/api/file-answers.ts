import type { FileRecord } from '../store/files.js'
import { UNKNOWN_TYPE } from '../store/files.js'
import { rfc3339 } from './archive-operations.js'

/*
 * What a file's answers say, apart from its bytes: the JSON that lists it, the headers every file
 * answer carries (so that a browser never runs a user's upload as this origin's page), and the
 * byte range a Range header asks for.
 */

/** A file as the API shows it: `{"id","size","type","created"}`. */
export function fileJson({ id, size, type, created }: FileRecord): string {
  return `{"id":"${id}","size":${size},"type":${JSON.stringify(type)},"created":"${rfc3339(created)}"}`
}

/**
 * Media types a browser shows without running anything of the file: pictures (not SVG, which
 * holds scripts), sound, video, plain text. Every other type, HTML, SVG, XML, JavaScript, PDF and
 * anything unknown among them, is sent as an attachment, to be saved rather than shown.
 */
const SHOWN = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
  'image/bmp',
  'audio/mpeg',
  'audio/ogg',
  'audio/wav',
  'audio/webm',
  'audio/aac',
  'audio/flac',
  'video/mp4',
  'video/webm',
  'video/ogg',
  'text/plain',
  'text/csv',
])

/** 'Image/PNG; q=1' -> 'image/png' */
function essenceOf(type: string): string {
  const semicolon = type.indexOf(';')
  return (semicolon === -1 ? type : type.slice(0, semicolon)).trim().toLowerCase()
}

/** Whether a browser would show a file of this type without running anything of it. */
function shownInline(type: string): boolean {
  return SHOWN.has(essenceOf(type))
}

/**
 * What every answer of a file's route carries, an error's too: nothing in it is ever sniffed, run
 * as a page of this origin, or read by another origin's page.
 */
export const FILE_SAFETY_HEADERS: readonly (readonly [string, string])[] = [
  ['x-content-type-options', 'nosniff'],
  ['content-security-policy', "sandbox; default-src 'none'"],
  ['cross-origin-resource-policy', 'same-origin'],
]

/**
 * The headers of a file's own answer (200, 206, 304, HEAD): its ETag, kept for a year (its id is
 * its bytes' hash, so it never changes), ranges, and `attachment` for any type a browser would run.
 * An error answer has none of them (FILE_ONLY_HEADERS), so no cache keeps a refusal as the file.
 */
export function fileHeaders(record: FileRecord): string[] {
  const headers = [
    'etag',
    `"${record.id}"`,
    'cache-control',
    'private, max-age=31536000, immutable',
    'accept-ranges',
    'bytes',
  ]
  if (!shownInline(record.type)) headers.push('content-disposition', 'attachment')
  return headers
}

/** The headers of a file's own answer that an error answer must not keep. */
export const FILE_ONLY_HEADERS = ['etag', 'accept-ranges', 'content-disposition'] as const

/** A media type token: RFC 9110's `token "/" token`, then parameters. */
const MEDIA_TYPE =
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*;[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+=(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"[^"\\\r\n]*"))*$/

/** Longest media type kept with a file. */
const MAX_TYPE_LENGTH = 200

/**
 * The media type an upload's Content-Type gives its file: its type and subtype in lowercase, its
 * parameters as sent; application/octet-stream without one; a string (the problem's detail) for a
 * header that is not a media type.
 * 'Image/PNG' -> 'image/png'; undefined -> 'application/octet-stream'; 'png' -> '...'
 */
export function uploadType(header: string | undefined): { type: string } | { bad: string } {
  if (header === undefined || header.trim() === '') return { type: UNKNOWN_TYPE }
  const text = header.trim()
  if (text.length > MAX_TYPE_LENGTH || !MEDIA_TYPE.test(text)) {
    return {
      bad: `Content-Type must be a media type such as image/png (at most ${MAX_TYPE_LENGTH} characters).`,
    }
  }
  const semicolon = text.indexOf(';')
  return semicolon === -1
    ? { type: text.toLowerCase() }
    : { type: text.slice(0, semicolon).toLowerCase() + text.slice(semicolon) }
}

/** The bytes [start, end) a Range asks for, 'none' when it cannot be met (416), or 'whole'. */
export type RangeAsked = { start: number; end: number } | 'none' | 'whole'

/**
 * What a Range header asks of a file of `size` bytes (RFC 9110 §14): one range of bytes, read
 * exactly; anything else it may hold (several ranges, another unit, a malformed header) is
 * answered with the whole file, as the RFC allows. A range that starts past the end is 'none'.
 * ('bytes=0-9', 100) -> { start: 0, end: 10 }; ('bytes=-10', 100) -> { start: 90, end: 100 };
 * ('bytes=200-', 100) -> 'none'; ('bytes=0-1,5-6', 100) -> 'whole'
 */
export function rangeOf(header: string | undefined, size: number): RangeAsked {
  if (header === undefined) return 'whole'
  // The unit is case-insensitive (RFC 9110 §14.1); leading zeros say nothing.
  const match = /^bytes=[ \t]*(\d*)-(\d*)[ \t]*$/i.exec(header)
  if (match === null) return 'whole'
  const [first = '', last = ''] = [match[1], match[2]].map((digits = '') =>
    digits.replace(/^0+(?=\d)/, ''),
  )
  if (first === '' && last === '') return 'whole'
  // No range of an empty file can be met, a suffix range included.
  if (size === 0) return 'none'
  // Past 15 digits a number is past any file's size (and no longer exact as a double).
  const huge = (digits: string) => digits.length > 15
  if (first === '') {
    const suffix = huge(last) ? size : Number(last)
    if (suffix === 0) return 'none'
    return { start: Math.max(0, size - suffix), end: size }
  }
  if (huge(first)) return 'none'
  const start = Number(first)
  if (last !== '' && !huge(last) && Number(last) < start) return 'whole'
  if (start >= size) return 'none'
  const end = last === '' || huge(last) ? size : Math.min(size, Number(last) + 1)
  return { start, end }
}
