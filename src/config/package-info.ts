import { readFileSync } from 'node:fs'

export interface PackageInfo {
  name: string
  version: string
  description: string
}

let cached: PackageInfo | undefined

/** This package's name, version and description, read once from its package.json. */
export function readPackageInfo(): PackageInfo {
  // dist/src/config/package-info.js -> package.json, both in the repository and in the installed package.
  cached ??= JSON.parse(
    readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
  ) as PackageInfo
  return cached
}
