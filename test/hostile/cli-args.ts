/**
 * '--seed 5 --requests=10' -> { seed: '5', requests: '10' }. Unknown flags are an error, so a
 * typo never silently runs the default.
 */
export function parseFlags(
  argv: readonly string[],
  known: readonly string[],
): Record<string, string> {
  const flags: Record<string, string> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg)
    const name = match?.[1]
    if (match === null || name === undefined || !known.includes(name)) {
      throw new Error(`unknown argument ${arg}; expected ${known.map((k) => `--${k}`).join(', ')}`)
    }
    const value = match[2] ?? argv[++i]
    if (value === undefined) throw new Error(`--${name} needs a value`)
    flags[name] = value
  }
  return flags
}

/** A non-negative integer flag, or the default. */
export function integerFlag(flags: Record<string, string>, name: string, fallback: number): number {
  const raw = flags[name]
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw))
    throw new Error(`--${name} must be a non-negative integer, not ${JSON.stringify(raw)}`)
  return Number(raw)
}

/** { '200': 5, '404': 1 } -> '200: 5, 404: 1' */
export function counts(byKey: Record<string, number>): string {
  return Object.entries(byKey)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ')
}
