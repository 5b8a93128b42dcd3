/**
 * `npm run bench:merge -- [merges] [rounds]`: the time of one `mergeNotes(base, mine, theirs)` on
 * two versions of a note of about 10 KB (a title, a body of 2,000 words, a few fields), each made from
 * the base by 20 edits of words (replaced, deleted or inserted) at places of its own, so that none
 * of them is a conflict; prints microseconds per merge for each round and their median, and checks
 * every merge kept all 40 edits.
 */
import { mergeNotes, type NoteFields } from '../src/client/index.js'

const [merges = 500, rounds = 5] = process.argv.slice(2).map(Number)

/** A deterministic generator (mulberry32), so every run merges the same notes. */
function random(seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const next = random(20261204)
/**
 * The body's words: drawn from a vocabulary of 800 made-up words (each about twice in the body,
 * about a quarter of them once, as in prose), or with `BENCH_MERGE_WORDS=9` from 9, so that almost
 * no word is found once and the diff has no anchors (its worst case short of a rewrite).
 */
const vocabulary = Array.from(
  { length: Number(process.env.BENCH_MERGE_WORDS ?? 800) },
  (_, i) => `w${i.toString(36)}${'aeiou'[i % 5]}`,
)
const word = () => vocabulary[Math.floor(next() * vocabulary.length)] as string

// 2,000 words and their spaces: about 10 KB of text in the body.
const base: string[] = Array.from({ length: 2_000 }, word)
const text = (words: readonly string[]) => `${words.join(' ')}.`

interface Edit {
  at: number
  kind: 'replace' | 'delete' | 'insert'
  word: string
}

/** One side's 20 edits at the word indexes `at`, in turn a replacement, a deletion, an insertion. */
const editsOf = (at: readonly number[], side: string): Edit[] =>
  at.map((i, n) => ({
    at: i,
    kind: (['replace', 'delete', 'insert'] as const)[n % 3] as Edit['kind'],
    word: `${side}${n}`,
  }))

/** The base's words with `edits` made, from the last place down so no place moves. */
function applied(edits: readonly Edit[]): string[] {
  const words = [...base]
  for (const { at, kind, word } of [...edits].sort((a, b) => b.at - a.at)) {
    if (kind === 'replace') words[at] = word
    else if (kind === 'delete') words.splice(at, 1)
    else words.splice(at, 0, word)
  }
  return words
}

// 40 places 42 words apart, every other one each side's: no two edits touch.
const places = Array.from({ length: 40 }, (_, n) => 10 + n * 42)
const mineEdits = editsOf(
  places.filter((_, n) => n % 2 === 0),
  'mine',
)
const theirsEdits = editsOf(
  places.filter((_, n) => n % 2 === 1),
  'theirs',
)
const note = (body: string, extra: Record<string, unknown>): NoteFields => ({
  id: 1,
  title: 'Weekly plan',
  body,
  tags: ['work', 'plan'],
  meta: { pinned: false, colour: 'blue' },
  ...extra,
})
const baseNote = note(text(base), {})
const mine = note(text(applied(mineEdits)), { meta: { pinned: true, colour: 'blue' } })
const theirs = note(text(applied(theirsEdits)), { title: 'Weekly plan (v2)' })
const expected = note(text(applied([...mineEdits, ...theirsEdits])), {
  title: 'Weekly plan (v2)',
  meta: { pinned: true, colour: 'blue' },
})

const bytes = Buffer.byteLength(JSON.stringify(baseNote))
const check = mergeNotes(baseNote, mine, theirs)
if (check.conflicts.length !== 0 || JSON.stringify(check.merged) !== JSON.stringify(expected)) {
  throw new Error(`the merge did not keep every edit: ${JSON.stringify(check.conflicts)}`)
}
console.log(
  `mergeNotes: a ${bytes}-byte note, 20 word edits on each side, ${merges} merges a round`,
)
const perRound: number[] = []
for (let round = 1; round <= rounds; round++) {
  const start = process.hrtime.bigint()
  for (let i = 0; i < merges; i++) mergeNotes(baseNote, mine, theirs)
  const us = Number(process.hrtime.bigint() - start) / 1e3 / merges
  perRound.push(us)
  console.log(`round ${round}: ${us.toFixed(1)} us per merge`)
}
const sorted = [...perRound].sort((a, b) => a - b)
console.log(`median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} us per merge`)
