import type { ListRecord } from '../store/types.js'
import type { Answer } from './answer.js'

/** Page answers kept per version (bench W8: the same page asked for again and again). */
const MAX_CACHED_PAGES = 64

/**
 * The answers to the list and its pages, kept while the store stays at their version. The store
 * returns the same list record until a write, so repeated reads send the same Buffer without
 * building or encoding it again (bench W3: 10,000 notes, about 1 MB, answered some 6 times as
 * fast as building it per request); a page is kept by its query string with the version it was
 * read at.
 */
export class ListAnswers {
  #listRecord: ListRecord | undefined
  #listAnswer: Answer | undefined
  #pages = { version: '', answers: new Map<string, Answer>() }

  /** The answer kept for `list`, if it was made from this very record. */
  list(list: ListRecord): Answer | undefined {
    return list === this.#listRecord ? this.#listAnswer : undefined
  }

  keepList(list: ListRecord, answer: Answer): Answer {
    this.#listRecord = list
    this.#listAnswer = answer
    return answer
  }

  /** The answer kept for the page `search` ('limit=2&after=x'), whatever version it was read at. */
  page(search: string): Answer | undefined {
    return this.#pages.answers.get(search)
  }

  /** The version of the store that the kept pages were read at. */
  get pagesVersion(): string {
    return this.#pages.version
  }

  keepPage(search: string, version: string, answer: Answer): Answer {
    let pages = this.#pages
    if (pages.version !== version) {
      pages = { version, answers: new Map() }
      this.#pages = pages
    }
    if (pages.answers.size >= MAX_CACHED_PAGES) pages.answers.clear()
    pages.answers.set(search, answer)
    return answer
  }
}
