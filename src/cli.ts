#!/usr/bin/env node
// The `notes-service` command: --help, --version, `token`, `export` and `import` (each with a
// --help of its own) here, anything else starts the server.
import { OPTIONS } from './config/config.js'
import { asksForHelp, formatHelp } from './config/help.js'
import { readPackageInfo } from './config/package-info.js'

const args = process.argv.slice(2)
if (args[0] === 'token') {
  // A user token for trying user notebooks out: see src/commands/token-command.ts.
  const { runTokenCommand } = await import('./commands/token-command.js')
  process.exitCode = await runTokenCommand(
    args.slice(1),
    process.env,
    process.stdout,
    process.stderr,
  )
} else if (args[0] === 'export' || args[0] === 'import') {
  // Every notebook to a file and back, on DATA_FILE or DATABASE_URL: src/commands/export-command.ts.
  const streams = { stdout: process.stdout, stderr: process.stderr }
  if (args[0] === 'export') {
    const { runExportCommand } = await import('./commands/export-command.js')
    process.exitCode = await runExportCommand(args.slice(1), process.env, streams)
  } else {
    const { runImportCommand } = await import('./commands/import-command.js')
    process.exitCode = await runImportCommand(args.slice(1), process.env, streams)
  }
} else if (asksForHelp(args)) {
  process.stdout.write(formatHelp(OPTIONS, readPackageInfo()))
} else if (args.includes('--version') || args.includes('-v')) {
  process.stdout.write(`${readPackageInfo().version}\n`)
} else {
  await import('./server.js')
}
