#!/usr/bin/env node
// The `notes-service` command: --help, --version and `token` here, anything else starts the server.
import { OPTIONS } from './config/config.js'
import { formatHelp } from './config/help.js'
import { readPackageInfo } from './config/package-info.js'

const args = process.argv.slice(2)
if (args[0] === 'token') {
  // A user token for trying user notebooks out: see src/ops/token-command.ts.
  const { runTokenCommand } = await import('./ops/token-command.js')
  process.exitCode = await runTokenCommand(
    args.slice(1),
    process.env,
    process.stdout,
    process.stderr,
  )
} else if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(formatHelp(OPTIONS, readPackageInfo()))
} else if (args.includes('--version') || args.includes('-v')) {
  process.stdout.write(`${readPackageInfo().version}\n`)
} else {
  await import('./server.js')
}
