import type { MaybePromise } from '../store/types.js'
import { Answer, notModified } from './answer.js'
import { type Coding, type CodingChoice, Compression, encodedEtag, isLarge } from './compression.js'
import { noneMatch } from './conditional.js'

/** `Vary: Accept-Encoding`, on every answer that may be compressed (by name and value). */
export const VARY = 'vary'
export const ACCEPT_ENCODING = 'Accept-Encoding'

/**
 * Answers in the coding a request asks for, for one app: what operations answer
 * goes in, the same answer compressed (or marked as varying) comes out. Two ways:
 * - `encoded`, per request (a note, a write's answer, a problem): compressed when its body is over
 *   1 KiB (or identity is refused);
 * - `encodedOnce`, for the cached list and pages: compressed once per version and coding, kept
 *   beside the uncompressed answer until a write replaces that.
 */
export class AnswerEncoding {
  readonly #compression = new Compression()
  /**
   * The compressed answers of the cached list and pages, by their uncompressed Answer: made once
   * per version and coding, and dropped with it. A promise while on the thread pool.
   */
  readonly #encodings = new WeakMap<Answer, Partial<Record<Coding, MaybePromise<Answer>>>>()

  /** The coding an Accept-Encoding header asks for (remembered per header value). */
  choose(header: string | undefined): CodingChoice | undefined {
    return this.#compression.choose(header)
  }

  /**
   * An answer compressed for this request alone when its body is over 1 KiB (or identity is
   * refused); such an answer varies by Accept-Encoding either way. Answers of 1 KiB or less (W1,
   * W4, W5) and bodiless ones come back as they are.
   */
  encoded(answer: Answer, choice: CodingChoice | undefined): MaybePromise<Answer> {
    const { body } = answer
    if (body === undefined) return answer
    const large = isLarge(body)
    if (!large && choice?.always !== true) return answer
    if (choice === undefined) return withVary(answer)
    const { coding } = choice
    const compressed = this.#compression.compress(body, coding, 'request')
    if (compressed === undefined) return withVary(answer)
    if (compressed instanceof Promise) {
      return compressed.then((bytes) => encodedAnswer(answer, coding, bytes))
    }
    return encodedAnswer(answer, coding, compressed)
  }

  /**
   * A cached list or page answer in the chosen coding, compressed once per version, or a 304
   * when If-None-Match names the representation's ETag, compressed or not ('"v.9-br"' or
   * '"v.9"').
   */
  encodedOnce(
    identity: Answer,
    choice: CodingChoice,
    ifNoneMatch: string | undefined,
  ): MaybePromise<Answer> {
    const { body } = identity
    const compressible =
      identity.status === 200 && body !== undefined && (choice.always || isLarge(body))
    const etag = etagOf(identity)
    const representation = compressible ? encodedEtag(etag, choice.coding) : etag
    if (noneMatch(ifNoneMatch, representation)) return notModified(identity.headers, representation)
    if (!compressible) return identity
    let encodings = this.#encodings.get(identity)
    if (encodings === undefined) {
      encodings = {}
      this.#encodings.set(identity, encodings)
    }
    const { coding } = choice
    const cached = encodings[coding]
    if (cached !== undefined) return cached
    const compressed = this.#compression.compress(body, coding, 'cached')
    // Too many compressions under way: this one answer goes uncompressed, and is not cached.
    if (compressed === undefined) return identity
    if (compressed instanceof Promise) {
      const slot = encodings
      // Every request for this version and coding waits for the same compression.
      const pending = compressed.then(
        (bytes) => {
          const answer = encodedAnswer(identity, coding, bytes)
          slot[coding] = answer
          return answer
        },
        (err: unknown) => {
          delete slot[coding]
          throw err
        },
      )
      slot[coding] = pending
      return pending
    }
    const answer = encodedAnswer(identity, coding, compressed)
    encodings[coding] = answer
    return answer
  }
}

/** The value of the answer's ETag header ('"v.9"'), which every list and page answer has. */
function etagOf(answer: Answer): string {
  const { headers } = answer
  for (let i = 0; i + 1 < headers.length; i += 2) {
    if (headers[i] === 'etag') return headers[i + 1] as string
  }
  throw new Error('the answer has no ETag')
}

/**
 * `answer` with `body` compressed in `coding`: Content-Encoding, Vary, and for a 200 (whose ETag
 * names its body) the ETag of the compressed representation; a 412 keeps the note's ETag.
 */
function encodedAnswer(answer: Answer, coding: Coding, body: Buffer): Answer {
  const headers: string[] = []
  let varies = false
  const from = answer.headers
  for (let i = 0; i + 1 < from.length; i += 2) {
    const name = from[i] as string
    let value = from[i + 1] as string
    if (name === 'etag' && answer.status === 200) value = encodedEtag(value, coding)
    else if (name === VARY) varies = true
    headers.push(name, value)
  }
  headers.push('content-encoding', coding)
  if (!varies) headers.push(VARY, ACCEPT_ENCODING)
  return new Answer(answer.status, answer.contentType, body, headers)
}

/** `answer`, uncompressed, with Vary: Accept-Encoding (another request may get it compressed). */
function withVary(answer: Answer): Answer {
  if (answer.headers.includes(VARY)) return answer
  return new Answer(answer.status, answer.contentType, answer.body, [
    ...answer.headers,
    VARY,
    ACCEPT_ENCODING,
  ])
}
