import { once } from 'node:events'
import { open, rename, rm } from 'node:fs/promises'
import type { Writable } from 'node:stream'
import { type Config, ConfigError } from '../config/config.js'
import { loadConfig } from '../config/load-config.js'
import { StoreUnavailableError } from '../store/types.js'

/**
 * What the `export` and `import` commands share: their exit codes, one-line failures, the
 * configuration they read, where an export goes, and the progress line on a terminal.
 */

/** 0 done; 1 refused or failed (one line on stderr); 2 a usage or configuration error. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const

/** A refusal or failure told in one line; `exitCode` says which. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message)
    this.name = 'CommandError'
  }
}

/** Where a command writes: process.stdout and process.stderr, or a test's. */
export interface CommandStreams {
  stdout: Writable
  stderr: Writable & { isTTY?: boolean }
}

/**
 * The configuration as the server would read it from `env` (no flags: the command's arguments
 * are its own), with a store to work on: DATA_FILE or DATABASE_URL.
 * @throws CommandError (2) for a bad setting, (1) when neither store is set
 */
export function commandConfig(env: NodeJS.ProcessEnv, what: string): Config {
  let config: Config
  try {
    config = loadConfig(env, [])
  } catch (err) {
    if (err instanceof ConfigError) throw new CommandError(err.message, EXIT.usage)
    throw err
  }
  if (config.dataFile === '' && config.databaseUrl === '') {
    throw new CommandError(
      `neither DATA_FILE nor DATABASE_URL is set: ${what} works on the store they name (a memory store lives only in the running service; GET /api/note with Accept: application/x-ndjson exports it).`,
    )
  }
  return config
}

/** An error as the one line a command prints: what it says, and a 503's cause. */
export function failureLine(err: unknown): string {
  if (err instanceof StoreUnavailableError && typeof err.cause === 'string') {
    return `${err.message} (${err.cause})`
  }
  if (err instanceof Error) return err.message.split('\n')[0] as string
  return String(err)
}

/**
 * Text written with backpressure: to a file (`path`), written to `path.partial` and renamed over
 * `path` once complete, so a failed export never leaves a file that looks whole; or to `stdout`.
 */
export class Output {
  readonly #path: string | undefined
  readonly #stdout: Writable
  #file: Awaited<ReturnType<typeof open>> | undefined

  constructor(path: string | undefined, stdout: Writable) {
    this.#path = path
    this.#stdout = stdout
  }

  async open(): Promise<void> {
    if (this.#path !== undefined) this.#file = await open(`${this.#path}.partial`, 'w')
  }

  async write(text: string): Promise<void> {
    if (this.#file !== undefined) {
      await this.#file.write(text)
      return
    }
    if (!this.#stdout.write(text)) await once(this.#stdout, 'drain')
  }

  /** Makes the output whole: the file synced and renamed into place. */
  async finish(): Promise<void> {
    const file = this.#file
    if (file === undefined || this.#path === undefined) return
    await file.sync()
    await file.close()
    this.#file = undefined
    await rename(`${this.#path}.partial`, this.#path)
  }

  /** After a failure: the partial file removed. */
  async abandon(): Promise<void> {
    const file = this.#file
    if (file === undefined || this.#path === undefined) return
    this.#file = undefined
    await file.close().catch(() => {})
    await rm(`${this.#path}.partial`, { force: true })
  }
}

/** How often the progress line changes at most. */
const PROGRESS_EVERY_MS = 250

/**
 * The progress line on stderr when it is a terminal: 'exported 120000 notes, 41200 notes/s',
 * rewritten in place at most four times a second; nothing at all when stderr is not a terminal.
 */
export class Progress {
  readonly #stderr: CommandStreams['stderr']
  readonly #verb: string
  readonly #start = Date.now()
  #notes = 0
  #shown = 0

  constructor(stderr: CommandStreams['stderr'], verb: string) {
    this.#stderr = stderr
    this.#verb = verb
  }

  add(notes: number): void {
    this.#notes += notes
    const now = Date.now()
    if (this.#stderr.isTTY !== true || now - this.#shown < PROGRESS_EVERY_MS) return
    this.#shown = now
    this.#show(now)
  }

  /** The last figures, and the line ended. */
  done(): void {
    if (this.#stderr.isTTY !== true) return
    this.#show(Date.now())
    this.#stderr.write('\n')
  }

  #show(now: number): void {
    const seconds = Math.max(now - this.#start, 1) / 1000
    const rate = Math.round(this.#notes / seconds)
    this.#stderr.write(`\r${this.#verb} ${this.#notes} notes, ${rate} notes/s\x1b[K`)
  }
}
