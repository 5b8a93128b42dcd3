#!/usr/bin/env node
// The `notes-service` command: --help and --version here, anything else starts the server.
import { OPTIONS } from './config/config.js'
import { formatHelp } from './config/help.js'
import { readPackageInfo } from './config/package-info.js'

const args = process.argv.slice(2)
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(formatHelp(OPTIONS, readPackageInfo()))
} else if (args.includes('--version') || args.includes('-v')) {
  process.stdout.write(`${readPackageInfo().version}\n`)
} else {
  await import('./server.js')
}
