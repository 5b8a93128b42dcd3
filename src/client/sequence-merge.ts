/**
 * A three-way merge of token sequences (diff3): the edits base -> mine and base -> theirs, each
 * found by a patience diff over Myers' O(ND) one, applied together where they do not collide. mergeNotes uses it for
 * the words of a string and for the order of an object's keys.
 */

/** What one side did to base: tokens [start, end) of base became `tokens`. */
interface Hunk {
  readonly start: number
  readonly end: number
  readonly tokens: readonly string[]
  readonly mine: boolean
}

interface SequenceMerge {
  readonly tokens: string[]
  /** Some edits of both sides collided: their region holds theirs. */
  readonly conflict: boolean
}

/**
 * Edits past this many between two anchors are not searched for: what lies between them counts
 * as one replacement. It bounds the diff's memory (about MAX_EDITS^2 integers) for a string
 * rewritten from end to end in words that repeat.
 */
const MAX_EDITS = 1000
const WHITESPACE = /^\s$/u

/**
 * Merges what mine and theirs did to base. Where both sides changed the same tokens, the same way,
 * the change is made once; two different insertions at one place are both kept, theirs first;
 * two edits that share only whitespace both deleted (two neighbouring words deleted, each with
 * one of the spaces around them) are both applied; any other collision is a conflict, and the
 * region takes theirs.
 * (a b c, a X c, a b Y) -> a X Y
 * (a b, a X b, a Y b) -> a Y X b (two insertions before b)
 * (a b c, a X c, a Y c) -> a Y c, conflict
 */
export function mergeSequences(
  base: readonly string[],
  mine: readonly string[],
  theirs: readonly string[],
): SequenceMerge {
  const numbers = new Map<string, number>()
  const intern = (tokens: readonly string[]): number[] =>
    tokens.map((token) => {
      let n = numbers.get(token)
      if (n === undefined) {
        n = numbers.size
        numbers.set(token, n)
      }
      return n
    })
  const b = intern(base)
  const hunks = [
    ...hunksOf(b, intern(mine), base, mine, true),
    ...hunksOf(b, intern(theirs), base, theirs, false),
  ].sort((x, y) => x.start - y.start || x.end - y.end || (x.mine ? 1 : -1))
  const tokens: string[] = []
  let conflict = false
  let at = 0
  for (let i = 0; i < hunks.length; ) {
    const group = [hunks[i] as Hunk]
    let lo = (hunks[i] as Hunk).start
    let hi = (hunks[i] as Hunk).end
    for (i++; i < hunks.length; i++) {
      const next = hunks[i] as Hunk
      if (!group.some((member) => collide(member, next))) break
      group.push(next)
      lo = Math.min(lo, next.start)
      hi = Math.max(hi, next.end)
    }
    pushAll(tokens, base, at, lo)
    at = hi
    if (group.length === 1) {
      pushAll(tokens, (group[0] as Hunk).tokens, 0, (group[0] as Hunk).tokens.length)
      continue
    }
    const ours = applied(base, lo, hi, group, true)
    const their = applied(base, lo, hi, group, false)
    if (same(ours, their)) pushAll(tokens, ours, 0, ours.length)
    else if (lo === hi) pushAll(tokens, [...their, ...ours], 0, their.length + ours.length)
    else if (sharesOnlyWhitespace(base, group)) {
      for (const hunk of group) pushAll(tokens, hunk.tokens, 0, hunk.tokens.length)
    } else {
      conflict = true
      pushAll(tokens, their, 0, their.length)
    }
  }
  pushAll(tokens, base, at, base.length)
  return { tokens, conflict }
}

/**
 * Whether two edits of different sides touch the same tokens. An insertion (an empty range)
 * collides with another at the same place, and with a replacement around it; edits that only
 * meet at a boundary do not: deleting 'b' and inserting before the 'c' after it are apart.
 */
function collide(x: Hunk, y: Hunk): boolean {
  if (x.mine === y.mine) return false
  const xEmpty = x.start === x.end
  const yEmpty = y.start === y.end
  if (xEmpty && yEmpty) return x.start === y.start
  if (xEmpty) return y.start < x.start && x.start < y.end
  if (yEmpty) return x.start < y.start && y.start < x.end
  return x.start < y.end && y.start < x.end
}

/** Base tokens [lo, hi) with one side's hunks of the group applied. */
function applied(
  base: readonly string[],
  lo: number,
  hi: number,
  group: readonly Hunk[],
  mine: boolean,
): string[] {
  const out: string[] = []
  let at = lo
  for (const hunk of group) {
    if (hunk.mine !== mine) continue
    pushAll(out, base, at, hunk.start)
    pushAll(out, hunk.tokens, 0, hunk.tokens.length)
    at = hunk.end
  }
  pushAll(out, base, at, hi)
  return out
}

/**
 * Whether the edits of a group overlap on whitespace only: ('a b c' -> 'a b' and -> 'a c': each
 * deletion takes one space with its word, and both take the one between b and c).
 */
function sharesOnlyWhitespace(base: readonly string[], group: readonly Hunk[]): boolean {
  for (const x of group) {
    for (const y of group) {
      if (!x.mine || y.mine || !collide(x, y)) continue
      if (x.start === x.end || y.start === y.end) return false
      for (let k = Math.max(x.start, y.start); k < Math.min(x.end, y.end); k++) {
        if (!WHITESPACE.test(base[k] as string)) return false
      }
    }
  }
  return true
}

/** The edits that turn a into b, as hunks over a's positions, in order. */
function hunksOf(
  a: readonly number[],
  b: readonly number[],
  aTokens: readonly string[],
  bTokens: readonly string[],
  mine: boolean,
): Hunk[] {
  const matches: number[] = []
  matchInto(a, b, 0, a.length, 0, b.length, matches)
  const hunks: Hunk[] = []
  let x = 0
  let y = 0
  // The matched pairs (x, y) in order, then a sentinel just past both ends.
  for (let i = 0; i <= matches.length; i += 2) {
    const mx = i < matches.length ? (matches[i] as number) : a.length
    const my = i < matches.length ? (matches[i + 1] as number) : b.length
    if (mx > x || my > y) hunks.push({ start: x, end: mx, tokens: bTokens.slice(y, my), mine })
    x = mx + 1
    y = my + 1
  }
  return slidRight(hunks, aTokens)
}

/**
 * Pushes the matched positions (x, y) of a[aLo, aHi) and b[bLo, bHi) in order, patience-style:
 * the common prefix and suffix, then the tokens found exactly once on each side (the longest run
 * of them in order) as anchors, the ranges between them in turn, and Myers' diff where no anchor
 * is left. Anchoring on such tokens (words, mostly; a space is never one) keeps a word matched to
 * itself: 'a b c d' -> 'X Y c' keeps c, rather than matching the two spaces and replacing c.
 */
function matchInto(
  a: readonly number[],
  b: readonly number[],
  aLo: number,
  aHi: number,
  bLo: number,
  bHi: number,
  out: number[],
): void {
  while (aLo < aHi && bLo < bHi && a[aLo] === b[bLo]) out.push(aLo++, bLo++)
  const tail: number[] = []
  while (aLo < aHi && bLo < bHi && a[aHi - 1] === b[bHi - 1]) tail.push(--aHi, --bHi)
  if (aLo < aHi && bLo < bHi) {
    const anchors = uniqueAnchors(a, b, aLo, aHi, bLo, bHi)
    if (anchors.length === 0) {
      out.push(...myersMatches(a, b, aLo, aHi - aLo, bLo, bHi - bLo))
    } else {
      let x = aLo
      let y = bLo
      for (let i = 0; i < anchors.length; i += 2) {
        const ax = anchors[i] as number
        const ay = anchors[i + 1] as number
        matchInto(a, b, x, ax, y, ay, out)
        out.push(ax, ay)
        x = ax + 1
        y = ay + 1
      }
      matchInto(a, b, x, aHi, y, bHi, out)
    }
  }
  for (let i = tail.length - 2; i >= 0; i -= 2) out.push(tail[i] as number, tail[i + 1] as number)
}

/**
 * The tokens that occur once in a[aLo, aHi) and once in b[bLo, bHi), as pairs [x, y, ...]: the
 * longest chain of them in the same order on both sides (patience sorting).
 */
function uniqueAnchors(
  a: readonly number[],
  b: readonly number[],
  aLo: number,
  aHi: number,
  bLo: number,
  bHi: number,
): number[] {
  const inA = new Map<number, number>()
  for (let x = aLo; x < aHi; x++) {
    const t = a[x] as number
    inA.set(t, inA.has(t) ? -1 : x)
  }
  const inB = new Map<number, number>()
  for (let y = bLo; y < bHi; y++) {
    const t = b[y] as number
    if (inA.has(t)) inB.set(t, inB.has(t) ? -1 : y)
  }
  const xs: number[] = []
  const ys: number[] = []
  for (let x = aLo; x < aHi; x++) {
    const t = a[x] as number
    const y = inB.get(t)
    if (inA.get(t) === x && y !== undefined && y >= 0) {
      xs.push(x)
      ys.push(y)
    }
  }
  // The longest increasing run of ys: tails[k] ends the best run of length k + 1 so far.
  const tails: number[] = []
  const before = new Int32Array(ys.length)
  for (let i = 0; i < ys.length; i++) {
    let lo = 0
    let hi = tails.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if ((ys[tails[mid] as number] as number) < (ys[i] as number)) lo = mid + 1
      else hi = mid
    }
    before[i] = lo > 0 ? (tails[lo - 1] as number) : -1
    tails[lo] = i
  }
  const chain: number[] = []
  for (let i = tails.at(-1) ?? -1; i >= 0; i = before[i] as number) {
    chain.push(ys[i] as number, xs[i] as number)
  }
  return chain.reverse()
}

/**
 * Each insertion and deletion moved as far right as the same tokens allow, so that both sides
 * place one edit alike whichever way their diffs found it: inserting 'X ' between 'b' and ' c'
 * of 'a b c' is found as ' X' after 'b' by one diff and 'X ' before 'c' by another; both become
 * 'X ' before 'c'. A replacement stays where it is.
 */
function slidRight(hunks: readonly Hunk[], base: readonly string[]): Hunk[] {
  return hunks.map((hunk, i) => {
    const bound = (hunks[i + 1] as Hunk | undefined)?.start ?? base.length
    let { start, end, tokens } = hunk
    if (start === end) {
      while (start < bound && tokens[0] === base[start]) {
        tokens = [...tokens.slice(1), base[start] as string]
        start++
      }
      end = start
    } else if (tokens.length === 0) {
      while (end < bound && base[start] === base[end]) {
        start++
        end++
      }
    }
    return { start, end, tokens, mine: hunk.mine }
  })
}

/**
 * The matched positions [x0, y0, x1, y1, ...] of a shortest edit script between a[aOff, aOff+n)
 * and b[bOff, bOff+m) (Myers 1986, greedy forward, a trace of the frontier per edit for the way
 * back); none when it needs more than MAX_EDITS edits.
 */
function myersMatches(
  a: readonly number[],
  b: readonly number[],
  aOff: number,
  n: number,
  bOff: number,
  m: number,
): number[] {
  const max = Math.min(n + m, MAX_EDITS)
  const v = new Int32Array(2 * max + 3)
  const trace: Int32Array[] = []
  const at = (k: number) => k + max + 1
  let end = -1
  for (let d = 0; d <= max && end < 0; d++) {
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && (v[at(k - 1)] as number) < (v[at(k + 1)] as number))
          ? (v[at(k + 1)] as number)
          : (v[at(k - 1)] as number) + 1
      let y = x - k
      while (x < n && y < m && a[aOff + x] === b[bOff + y]) {
        x++
        y++
      }
      v[at(k)] = x
      if (x >= n && y >= m) end = d
    }
    trace.push(v.slice(at(-d), at(d) + 1))
  }
  if (end < 0) return []
  const matches: number[] = []
  let x = n
  let y = m
  for (let d = end; d > 0; d--) {
    const before = trace[d - 1] as Int32Array
    const k = x - y
    const from = (j: number) => before[j + d - 1] as number
    const down = k === -d || (k !== d && from(k - 1) < from(k + 1))
    const pk = down ? k + 1 : k - 1
    const px = from(pk)
    const py = px - pk
    const sx = down ? px : px + 1
    while (x > sx) {
      x--
      y--
      matches.push(bOff + y, aOff + x)
    }
    x = px
    y = py
  }
  while (x > 0) {
    x--
    y--
    matches.push(bOff + y, aOff + x)
  }
  // Collected backwards as (y, x) pairs: reversed, they read (x, y) in order.
  return matches.reverse()
}

function pushAll(out: string[], from: readonly string[], start: number, end: number): void {
  for (let i = start; i < end; i++) out.push(from[i] as string)
}

function same(x: readonly string[], y: readonly string[]): boolean {
  return x.length === y.length && x.every((token, i) => token === y[i])
}
