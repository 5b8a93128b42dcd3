import { randomBytes } from 'node:crypto'

/**
 * Version tokens: the store's epoch, a dot, and the change sequence in base 36.
 * The epoch differs between stores (and between runs of a memory store), so a token never repeats
 * for different contents.
 */

/** 'k2x9q1' and 5 -> 'k2x9q1.5'; 'k2x9q1' and 36 -> 'k2x9q1.10' */
export function versionToken(epoch: string, sequence: number): string {
  return `${epoch}.${sequence.toString(36)}`
}

/**
 * The sequence a token of this epoch stands for, or undefined when it is not one:
 * ('k2x9q1.10', 'k2x9q1') -> 36; ('other.10', 'k2x9q1'), ('k2x9q1.A', 'k2x9q1') -> undefined.
 * At most 11 digits, so the sequence stays an exact integer.
 */
export function tokenSequence(token: string, epoch: string): number | undefined {
  const dot = token.lastIndexOf('.')
  if (dot === -1 || token.slice(0, dot) !== epoch) return undefined
  const digits = token.slice(dot + 1)
  if (!/^[0-9a-z]{1,11}$/.test(digits)) return undefined
  return Number.parseInt(digits, 36)
}

/**
 * The strong ETag of the content a write produced: its version token, quoted. 'k2x9q1.5' ->
 * '"k2x9q1.5"'. The same ETag means the same bytes on every instance.
 */
export function etagOf(version: string): string {
  return JSON.stringify(version)
}

/** A fresh epoch for a store's version tokens: 48 random bits in base 36, 'k2x9q1ab3c'. */
export function randomEpoch(): string {
  return randomBytes(6).readUIntBE(0, 6).toString(36)
}
