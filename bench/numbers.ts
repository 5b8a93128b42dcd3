/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  if (sorted.length === 0) return Number.NaN
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** 12345.6 -> '12,346'; '-' for NaN or infinity. */
export const thousands = (value: number): string =>
  Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '-'
