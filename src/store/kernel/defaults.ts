import { IdempotencyKeyReusedError } from '../types.js'

/** What a store keeps when its options do not say otherwise; both stores mean the same. */
export const STORE_DEFAULTS = {
  /** Changes kept for the change feed to replay (CHANGE_HISTORY). */
  historyLimit: 10_000,
  /** Idempotency keys remembered. */
  maxIdempotencyKeys: 100_000,
  /** How long an idempotency key is remembered, in ms: 24 h. */
  idempotencyTtlMs: 24 * 60 * 60 * 1000,
} as const

/**
 * Searches (`q`) kept per version, so that paging through one costs one scan: beyond it the
 * cache is emptied, which bounds it whatever queries clients send.
 */
export const MAX_CACHED_SEARCHES = 16

/** An Idempotency-Key sent again with another body (a 422): the same words from every store. */
export function keyReused(): IdempotencyKeyReusedError {
  return new IdempotencyKeyReusedError(
    'This Idempotency-Key was already used with a different request body.',
  )
}
