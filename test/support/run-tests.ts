import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { constants } from 'node:os'
import { join } from 'node:path'
import { compiled, ROOT, testSources } from './test-files.js'

/**
 * `node dist/test/support/run-tests.js [--unit] [--list] [--NODE-TEST-OPTION=VALUE...]`: runs the
 * compiled test files of the whole suite, or of the unit tier with --unit, in one `node --test`
 * (3 files at a time unless the options say otherwise). The files are found from test/'s sources
 * (test-files.ts), so a module left in dist/ by a file since moved or deleted is never run, and a
 * test file not yet compiled is an error, not a silent gap. Node 20's `node --test` takes no
 * globs, hence this list. --list prints the files instead, one a line.
 */
const args = process.argv.slice(2)
const unit = args.includes('--unit')
const list = args.includes('--list')
const options = args.filter((arg) => arg !== '--unit' && arg !== '--list')
// A file given here would run with every other one: `node --test FILE` runs it alone.
const stray = options.find((option) => !option.startsWith('--'))
if (stray !== undefined) {
  process.stderr.write(
    `run-tests: ${stray} is not an option (--name=value); to run one file: node --test ${stray}\n`,
  )
  process.exit(2)
}

const files = testSources(unit ? 'unit' : 'all').map(compiled)
const missing = files.filter((file) => !existsSync(join(ROOT, file)))
if (missing.length > 0) {
  process.stderr.write(`run-tests: not compiled (npm run compile): ${missing.join(', ')}\n`)
  process.exit(1)
}
if (list) {
  process.stdout.write(`${files.join('\n')}\n`)
  process.exit(0)
}

const concurrency = options.some((option) => option.startsWith('--test-concurrency'))
  ? []
  : ['--test-concurrency=3']
const child = spawn(process.execPath, ['--test', ...concurrency, ...options, ...files], {
  cwd: ROOT,
  stdio: 'inherit',
})
// Ctrl-C reaches the whole process group; a signal sent to this process alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => child.kill(signal))
}
// The exit code is the run's; a run ended by a signal exits as a shell reports it (SIGINT: 130).
child.once('exit', (code, signal) => {
  process.exit(signal === null ? (code ?? 1) : 128 + constants.signals[signal])
})
