/**
 * A small seeded PRNG (sfc32, seeded through splitmix32) so that a fuzz run is reproduced from
 * its printed seed: the same seed gives the same requests, in the same order (see stepRandom).
 */
export interface Random {
  readonly seed: number
  /** An integer in [0, n). */
  int(n: number): number
  /** An integer in [min, max]. */
  between(min: number, max: number): number
  /** True with probability p. */
  chance(p: number): boolean
  pick<T>(items: readonly T[]): T
  /** Picks by weight: [[3, 'a'], [1, 'b']] gives 'a' three times as often as 'b'. */
  weighted<T>(choices: readonly (readonly [number, T])[]): T
  /** A float in [0, 1). */
  next(): number
}

export function createRandom(seed: number): Random {
  let s = seed >>> 0
  const splitmix = (): number => {
    s = (s + 0x9e3779b9) >>> 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    return (z ^ (z >>> 16)) >>> 0
  }
  let a = splitmix()
  let b = splitmix()
  let c = splitmix()
  let d = splitmix()
  const next32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0
    d = (d + 1) >>> 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) >>> 0
    c = ((c << 21) | (c >>> 11)) >>> 0
    c = (c + t) >>> 0
    return t
  }
  for (let i = 0; i < 12; i++) next32()
  const next = (): number => next32() / 0x1_0000_0000
  const int = (n: number): number => Math.floor(next() * n)
  return {
    seed: seed >>> 0,
    next,
    int,
    between: (min, max) => min + int(max - min + 1),
    chance: (p) => next() < p,
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new Error('pick from an empty list')
      return items[int(items.length)] as T
    },
    weighted: <T>(choices: readonly (readonly [number, T])[]): T => {
      let total = 0
      for (const [w] of choices) total += w
      let at = next() * total
      for (const [w, value] of choices) {
        at -= w
        if (at < 0) return value
      }
      return (choices[choices.length - 1] as readonly [number, T])[1]
    },
  }
}

/**
 * The PRNG for step `index` of a run from `seed`: a stream of its own per step, so that what one
 * step draws cannot shift what later steps draw. A request that embeds what the service made (an
 * id from its clock, a version token with its random epoch) differs in length from one run to the
 * next, and any draw made per byte or against a size then differs too; with one stream for the
 * whole run, every later request differed after it, and a replay of a failing seed sent other
 * requests than the failing run. With a stream per step a replay sends the same requests, the
 * service's ids and tokens apart.
 */
export function stepRandom(seed: number, index: number): Random {
  return createRandom(mix32((seed >>> 0) ^ mix32(index + 0x632be5ab)))
}

/** MurmurHash3's 32-bit finalizer: every input bit moves about half the output bits. */
function mix32(x: number): number {
  let h = x >>> 0
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}

/** A fresh seed for a run that was given none; printed so the run can be repeated. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 0x1_0000_0000)
}
