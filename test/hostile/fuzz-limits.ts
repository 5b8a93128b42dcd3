import type { ModelLimits } from '../support/note-model.js'

/**
 * The limits fuzzing runs the service with: small enough that oversize bodies are cheap to send
 * and that both capacity caps (note count and bytes) are reached now and then.
 */
export const FUZZ_LIMITS: ModelLimits = {
  bodyLimit: 16 * 1024,
  maxDepth: 128,
  maxNotes: 150,
  maxStoreBytes: 96 * 1024,
}
