/*
 * Whether a stream resumed at a version token may go on from it in a notebook whose member left
 * it and came back while away: the changes after the token are sent only when all of them came
 * while the membership that holds now lasted, that is, when it began at or before the token.
 */

/**
 * How a stream resumed at `token` goes on in a notebook whose membership began at `since`
 * (Access.since):
 * - 'token': it began at or before the token: every change after the token is one of its time;
 * - 'start': it began after the token: the changes between are of a time the user may not have
 *   been a member, and only those after `since` may be sent;
 * - 'reset': it cannot tell (no start known, tokens of two epochs, a token it cannot read): the
 *   client reloads the notebook rather than get a change it may not see.
 *   ('e.9', 'e.5') -> 'token'; ('e.3', 'e.5') -> 'start'; ('e.9', undefined), ('f.9', 'e.5') -> 'reset'
 */
export function resumeAt(token: string, since: string | undefined): 'token' | 'start' | 'reset' {
  if (since === undefined) return 'reset'
  const at = split(token)
  const began = split(since)
  if (at === undefined || began === undefined || at.epoch !== began.epoch) return 'reset'
  return at.sequence >= began.sequence ? 'token' : 'start'
}

/** 'k2x9q1.1c' -> { epoch: 'k2x9q1', sequence: 48 }; undefined for what is not a token. */
function split(token: string): { epoch: string; sequence: number } | undefined {
  const dot = token.lastIndexOf('.')
  const digits = token.slice(dot + 1)
  if (dot < 1 || !/^[0-9a-z]{1,11}$/.test(digits)) return undefined
  return { epoch: token.slice(0, dot), sequence: Number.parseInt(digits, 36) }
}
