import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { dirname, join, relative } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { OPTIONS, type Option, type Setting } from '../src/config/config.js'
import { loadConfig } from '../src/config/load-config.js'
import { isRejection } from '../src/config/value-parsers.js'
import { type ServerProcess, startServer } from './hostile/server-process.js'

/**
 * Every example in README.md, docs/operations.md and docs/api.md, run against the real service and
 * compared with what it answers.
 *
 * The conventions of their examples, which this file reads:
 * - A ```console block is a terminal transcript: `$ ` starts a command (a trailing `\` continues
 *   it on the next line); the lines up to the next `$ ` are its output, exactly. An output that
 *   ends with a newline is shown without it (the next `$ ` starts a line anyway); a response body
 *   never ends with one when it is JSON, which is checked too. A line `...` in an output stands for lines left out.
 * - Commands: `curl` with -s, -i, -X, -H and -d against `localhost:3000` (sent with node:http to a
 *   fresh service started for the block, on a free port), optionally piped into `grep -E` or
 *   `head -c`/`head -n`; and `node dist/src/cli.js ...`, optionally with `VAR=value` before it and
 *   `; echo "exit $?"` after it.
 * - `<!-- readme-test env: NAME=value ... -->` right before a block starts its service with those
 *   variables.
 * - Masked: 13-digit note ids (each README id stands for the real id answered in its place, and is
 *   replaced by it in later requests), and so notebook and invitation ids, invitation tokens and
 *   their expiry times, and files' upload times in JSON answers, the epoch of version tokens
 *   (likewise: an ETag shown can be sent back in If-Match), generated request ids (12 hex digits,
 *   '-', a counter) and the Date header.
 * - ```sh blocks are instructions (npm ci, npm start), not run; no other kind of block is allowed.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'dist/src/cli.js')
/** The documents whose examples are run, relative to the repository. */
const DOCUMENTS = ['README.md', 'docs/operations.md', 'docs/api.md']
const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

interface Block {
  /** The document, relative to the repository. */
  file: string
  lang: string
  /** 1-based line of the opening fence. */
  line: number
  lines: string[]
  env: Record<string, string>
}

interface Step {
  command: string
  /** 1-based line of the command in its document. */
  line: number
  /** 1-based line of the first output line. */
  outputLine: number
  output: string[]
}

/** The fenced blocks of a markdown text, with the env directive on the line before each. */
function fencedBlocks(markdown: string, file: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)$/.exec(lines[i] as string)
    if (open === null) continue
    const line = i + 1
    let before = i - 1
    while (before >= 0 && (lines[before] as string).trim() === '') before--
    const directive = /^<!-- readme-test env: (.*) -->$/.exec(lines[before] ?? '')
    const body: string[] = []
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i] as string)
    if (i === lines.length) throw new Error(`${file}:${line}: the block is never closed`)
    blocks.push({
      file,
      lang: open[1] as string,
      line,
      lines: body,
      env: assignments(directive?.[1]),
    })
  }
  return blocks
}

/** 'A=1 B=two' -> { A: '1', B: 'two' } */
function assignments(text: string | undefined): Record<string, string> {
  const env: Record<string, string> = {}
  for (const word of text === undefined ? [] : shellWords(text)) {
    if (typeof word !== 'string' || !/^[A-Z_][A-Z0-9_]*=/.test(word)) {
      throw new Error(`not a VAR=value assignment: ${String(word)}`)
    }
    const eq = word.indexOf('=')
    env[word.slice(0, eq)] = word.slice(eq + 1)
  }
  return env
}

/** A console block's commands, each with the output lines that follow it. */
function transcript(block: Block): Step[] {
  const steps: Step[] = []
  for (let i = 0; i < block.lines.length; i++) {
    const line = block.lines[i] as string
    if (line.startsWith('$ ')) {
      let command = line.slice(2)
      const at = block.line + 1 + i
      while (command.endsWith('\\') && i + 1 < block.lines.length) {
        command = `${command.slice(0, -1).trimEnd()} ${(block.lines[++i] as string).trim()}`
      }
      steps.push({ command, line: at, outputLine: block.line + 2 + i, output: [] })
    } else {
      const step = steps.at(-1)
      if (step === undefined)
        throw new Error(`${block.file}:${block.line}: output before a command`)
      step.output.push(line)
    }
  }
  return steps
}

type Token = string | { op: '|' | ';' }

/** Shell words with single and double quotes and backslashes; `|` and `;` as operators. */
function shellWords(text: string): Token[] {
  const tokens: Token[] = []
  let word = ''
  let inWord = false
  const end = (): void => {
    if (inWord) tokens.push(word)
    word = ''
    inWord = false
  }
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (c === "'") {
      const close = text.indexOf("'", i + 1)
      if (close === -1) throw new Error(`unclosed ' in ${text}`)
      word += text.slice(i + 1, close)
      i = close
      inWord = true
    } else if (c === '"') {
      let j = i + 1
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === '\\' && '"\\$`'.includes(text[j + 1] ?? '')) j++
        word += text[j]
      }
      if (j === text.length) throw new Error(`unclosed " in ${text}`)
      i = j
      inWord = true
    } else if (c === '\\') {
      word += text[++i] ?? ''
      inWord = true
    } else if (c === ' ' || c === '\t') {
      end()
    } else if (c === '|' || c === ';') {
      end()
      tokens.push({ op: c })
    } else {
      word += c
      inWord = true
    }
  }
  end()
  return tokens
}

interface Command {
  env: Record<string, string>
  argv: string[]
  /** The pipeline after the command: ['grep', '-E', '...'], ['head', '-c', '64'] */
  filters: string[][]
  /** `; echo "exit $?"` follows. */
  echoExit: boolean
}

function parseCommand(text: string): Command {
  const segments: string[][] = [[]]
  let echoExit = false
  const tokens = shellWords(text)
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token
    if (typeof token === 'string') {
      ;(segments.at(-1) as string[]).push(token)
    } else if (token.op === '|') {
      segments.push([])
    } else {
      const rest = tokens.slice(i + 1)
      assert.deepEqual(rest, ['echo', 'exit $?'], `only '; echo "exit $?"' may follow ';': ${text}`)
      echoExit = true
      break
    }
  }
  const [first, ...filters] = segments as [string[], ...string[][]]
  const env: Record<string, string> = {}
  while (first.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(first[0] as string)) {
    Object.assign(env, assignments(first.shift()))
  }
  return { env, argv: first, filters, echoExit }
}

interface CurlRequest {
  method: string
  path: string
  headers: [string, string][]
  data: string | undefined
  include: boolean
  silent: boolean
}

/** curl's arguments as far as the README uses them; anything else fails the test. */
function parseCurl(args: readonly string[]): CurlRequest {
  let method: string | undefined
  let data: string | undefined
  let url: string | undefined
  let include = false
  let silent = false
  const headers: [string, string][] = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    const value = (): string => {
      const next = args[++i]
      if (next === undefined) throw new Error(`curl ${arg} needs a value`)
      return next
    }
    if (arg === '-X' || arg === '--request') {
      method = value()
    } else if (arg === '-H' || arg === '--header') {
      const header = value()
      const colon = header.indexOf(':')
      headers.push([header.slice(0, colon).trim(), header.slice(colon + 1).trim()])
    } else if (arg === '-d' || arg === '--data') {
      data = value()
    } else if (/^-[isS]+$/.test(arg)) {
      include ||= arg.includes('i')
      silent ||= arg.includes('s')
    } else if (arg.startsWith('-') || url !== undefined) {
      throw new Error(`the README test does not understand curl argument ${arg}`)
    } else {
      url = arg
    }
  }
  const path = /^(?:http:\/\/)?localhost:3000(\/.*)$/.exec(url ?? '')?.[1]
  if (path === undefined) throw new Error(`curl URL must be localhost:3000/...: ${url}`)
  if (data !== undefined && !headers.some(([name]) => name.toLowerCase() === 'content-type')) {
    // What curl sends with -d unless told otherwise.
    headers.push(['Content-Type', 'application/x-www-form-urlencoded'])
  }
  return {
    method: method ?? (data === undefined ? 'GET' : 'POST'),
    path,
    headers,
    data,
    include,
    silent,
  }
}

interface Answer {
  /** What curl prints: with -i the status line and headers (one per line), a blank line, the body. */
  text: string
  body: string
  contentType: string | undefined
}

function send(port: number, agent: Agent, curl: CurlRequest): Promise<Answer> {
  const body = curl.data === undefined ? undefined : Buffer.from(curl.data)
  const headers: [string, string][] = [
    ['Host', 'localhost:3000'],
    ['User-Agent', 'curl/8'],
    ['Accept', '*/*'],
    ...curl.headers,
  ]
  if (body !== undefined) headers.push(['Content-Length', String(body.length)])
  // curl sends a request without -d with no body headers at all, which means no body; Node's
  // client would send 'Transfer-Encoding: chunked' for a PUT or POST, a body of unknown size that
  // the service answers differently (it closes the connection after an early refusal). Saying
  // 'Content-Length: 0' means what curl's request means.
  else if (!['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(curl.method)) {
    headers.push(['Content-Length', '0'])
  }
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: curl.method,
        path: curl.path,
        agent,
        headers: headers.flat(),
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          const lines = [`HTTP/${res.httpVersion} ${res.statusCode} ${res.statusMessage}`]
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`)
          }
          resolve({
            text: curl.include ? `${lines.join('\n')}\n\n${text}` : text,
            body: text,
            contentType: res.headers['content-type'],
          })
        })
        res.on('error', reject)
      },
    )
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${curl.method} ${curl.path}`)))
    req.on('error', reject)
    req.end(body)
  })
}

/** `grep -E re`, `head -c N`, `head -n N` applied to a command's output. */
function applyFilter(text: string, filter: readonly string[]): string {
  const [name, flag, arg] = filter
  if (name === 'grep' && flag === '-E' && arg !== undefined && filter.length === 3) {
    const re = new RegExp(arg)
    return text
      .split('\n')
      .filter((line, i, all) => !(i === all.length - 1 && line === '') && re.test(line))
      .map((line) => `${line}\n`)
      .join('')
  }
  if (name === 'head' && flag === '-c' && arg !== undefined && filter.length === 3) {
    return Buffer.from(text).subarray(0, Number(arg)).toString('utf8')
  }
  if (name === 'head' && flag === '-n' && arg !== undefined && filter.length === 3) {
    const lines = text.split('\n')
    return lines.length <= Number(arg) ? text : `${lines.slice(0, Number(arg)).join('\n')}\n`
  }
  throw new Error(`the README test does not understand the filter ${filter.join(' ')}`)
}

const GENERATED_ID = /^[0-9a-f]{12}-[0-9a-z]+$/
/**
 * A version token's epoch, random per start: 'k2x9q1m3ab' of "k2x9q1m3ab.5", in a
 * header or a batch's answers ("etag":"\"k2x9q1m3ab.5\"").
 */
const VERSION_EPOCH =
  /(?:^(?:etag: "|notes-version: |id: )|"etag":"\\")([0-9a-z]{4,13})\.[0-9a-z]+/im
const HTTP_DATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/
const NOTE_ID = /\b\d{13}\b/g
/**
 * What is random or timed per run inside a JSON answer: a notebook's or an invitation's id (22
 * characters), an invitation's token (32) and its expiry, a file's time of upload. Masked as note
 * ids are.
 */
const OPAQUE =
  /"(?:id|token|expires|created)":"([A-Za-z0-9_-]{22}|[A-Za-z0-9_-]{32}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"/g

/**
 * The actual output with what differs from run to run replaced by the README's values where the
 * README has one of the same kind in the same place: 13-digit ids (recorded in `ids`, README id ->
 * real id, so later requests can use them), generated request ids, Date headers.
 */
function masked(
  actual: string,
  expected: string,
  ids: Map<string, string>,
  epochs: Map<string, string>,
): string {
  const seen = [...expected.matchAll(NOTE_ID)].map((m) => m[0])
  const found = [...actual.matchAll(NOTE_ID)].map((m) => m[0])
  let text = actual
  const readmeEpoch = VERSION_EPOCH.exec(expected)?.[1]
  const realEpoch = VERSION_EPOCH.exec(actual)?.[1]
  if (readmeEpoch !== undefined && realEpoch !== undefined) {
    text = text.replaceAll(`${realEpoch}.`, `${readmeEpoch}.`)
    epochs.set(readmeEpoch, realEpoch)
  }
  // An epoch seen before, also where no header shows it (an ETag inside a problem's detail).
  for (const [readme, real] of epochs) text = text.replaceAll(`${real}.`, `${readme}.`)
  if (seen.length === found.length) {
    const toReadme = new Map<string, string>()
    seen.forEach((readmeId, i) => {
      const realId = found[i] as string
      const known = ids.get(readmeId)
      const taken = [...ids].some(([r, a]) => a === realId && r !== readmeId)
      if ((known === undefined || known === realId) && !taken) {
        ids.set(readmeId, realId)
        toReadme.set(realId, readmeId)
      }
    })
    text = text.replace(NOTE_ID, (id) => toReadme.get(id) ?? id)
  }
  const seenOpaque = [...expected.matchAll(OPAQUE)].map((m) => m[1] as string)
  const foundOpaque = [...text.matchAll(OPAQUE)].map((m) => m[1] as string)
  if (seenOpaque.length === foundOpaque.length) {
    seenOpaque.forEach((readmeValue, i) => {
      const realValue = foundOpaque[i] as string
      if (readmeValue.length !== realValue.length) return
      if ((ids.get(readmeValue) ?? realValue) !== realValue) return
      ids.set(readmeValue, realValue)
      text = text.replaceAll(realValue, readmeValue)
    })
  }
  const expectedLines = expected.split('\n')
  return text
    .split('\n')
    .map((line, i) => {
      const want = expectedLines[i]
      if (want === undefined) return line
      const header = /^(x-request-id|Date|last-modified): (.*)$/i.exec(line)
      const wanted = /^(x-request-id|Date|last-modified): (.*)$/i.exec(want)
      if (header === null || wanted === null || header[1] !== wanted[1]) return line
      const pattern = header[1]?.toLowerCase() === 'x-request-id' ? GENERATED_ID : HTTP_DATE
      return pattern.test(header[2] as string) && pattern.test(wanted[2] as string) ? want : line
    })
    .join('\n')
}

/**
 * Compares an output with the transcript's lines. `...` lines stand for lines left out: every
 * piece between them must appear in order, the first at the start and the last at the end.
 */
function assertOutput(actual: string, output: readonly string[], where: string): void {
  if (!output.some((line) => line.trim() === '...')) {
    assert.equal(actual, output.join('\n'), `${where}: the output differs from the README`)
    return
  }
  const lines = actual.split('\n')
  const pieces: string[][] = [[]]
  for (const line of output) {
    if (line.trim() === '...') pieces.push([])
    else (pieces.at(-1) as string[]).push(line)
  }
  let at = 0
  pieces.forEach((piece, i) => {
    const last = i === pieces.length - 1
    let found = -1
    for (let start = at; start + piece.length <= lines.length; start++) {
      if (i === 0 && start > 0) break
      if (last && start + piece.length !== lines.length) continue
      if (piece.every((line, k) => lines[start + k] === line)) {
        found = start
        break
      }
    }
    assert.notEqual(
      found,
      -1,
      `${where}: the README's excerpt ${JSON.stringify(piece)} is not in the real output:\n${actual}`,
    )
    at = found + piece.length
  })
}

/** Runs `node dist/src/cli.js ...` and gives what a terminal shows (stdout, stderr, exit echo). */
function runCli(
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ output: string; code: number }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 15_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
        resolve({ output: stdout + stderr, code })
      },
    )
  })
}

/** README_UPDATE=1: the real outputs to write into each document, by its first lines' numbers. */
const pendingUpdates = new Map<string, { at: number; count: number; lines: string[] }[]>()

after(() => {
  for (const [file, updates] of pendingUpdates) {
    if (updates.length === 0) continue
    const path = join(ROOT, file)
    const lines = readFileSync(path, 'utf8').split('\n')
    updates.sort((a, b) => b.at - a.at)
    for (const { at, count, lines: replacement } of updates)
      lines.splice(at - 1, count, ...replacement)
    writeFileSync(path, lines.join('\n'))
  }
})

/** Runs one console block: a fresh service (when the block calls curl) for all its steps. */
async function runBlock(block: Block): Promise<void> {
  const ids = new Map<string, string>()
  /** The README's version epoch -> the real one, as first seen in an output. */
  const epochs = new Map<string, string>()
  const updates = pendingUpdates.get(block.file) ?? []
  pendingUpdates.set(block.file, updates)
  let server: ServerProcess | undefined
  const agent = new Agent({ keepAlive: true })
  try {
    /** Shell variables set by `NAME=$(node dist/src/cli.js ...)`, used as "$NAME" by curl. */
    const variables = new Map<string, string>()
    for (const step of transcript(block)) {
      const where = `${block.file}:${step.line} (${step.command})`
      const assigned = /^([A-Z_][A-Z0-9_]*)=\$\((node dist\/src\/cli\.js .*)\)$/.exec(step.command)
      if (assigned !== null) {
        // The command's environment is the block's, as a reader's shell exports it.
        const inner = parseCommand(assigned[2] as string)
        const { output: printed, code } = await runCli(inner.argv.slice(2), {
          ...block.env,
          ...inner.env,
        })
        assert.equal(code, 0, `${where}: ${printed}`)
        variables.set(assigned[1] as string, printed.trim())
        assert.deepEqual(step.output, [], `${where}: an assignment prints nothing`)
        continue
      }
      const command = parseCommand(step.command)
      let output: string
      if (command.argv[0] === 'curl') {
        assert.equal(command.echoExit, false, where)
        assert.deepEqual(command.env, {}, `${where}: set the service's variables in a directive`)
        let line = step.command
        for (const [readmeId, realId] of ids) line = line.replaceAll(readmeId, realId)
        for (const [readme, real] of epochs) line = line.replaceAll(`${readme}.`, `${real}.`)
        for (const [name, value] of variables) line = line.replaceAll(`$${name}`, value)
        const curl = parseCurl(parseCommand(line).argv.slice(1))
        if (command.filters.length > 0) {
          // curl shows its progress meter when its output is not a terminal.
          assert.ok(curl.silent, `${where}: a piped curl needs -s, or the reader sees a meter`)
        }
        server ??= await startServer({ env: block.env })
        const answer = await send(server.port, agent, curl)
        // JSON and +json, not NDJSON (an export's every line ends with a newline, the last too).
        if (/\bjson\b/.test(answer.contentType ?? '')) {
          assert.ok(!answer.body.endsWith('\n'), `${where}: the JSON body ends with a newline`)
        }
        output = command.filters.reduce(applyFilter, answer.text)
      } else if (command.argv[0] === 'node' && command.argv[1] === 'dist/src/cli.js') {
        const { output: printed, code } = await runCli(command.argv.slice(2), command.env)
        output = command.echoExit ? `${printed}exit ${code}\n` : printed
      } else {
        throw new Error(`${where}: the README test cannot run this command`)
      }
      // The transcript shows an output's final newline as the start of the next line.
      const shown = output.endsWith('\n') ? output.slice(0, -1) : output
      const seen = masked(shown, step.output.join('\n'), ids, epochs)
      if (process.env.README_UPDATE === '1' && !step.output.some((l) => l.trim() === '...')) {
        // For whoever changes an answer on purpose: writes the real outputs into the document.
        updates.push({ at: step.outputLine, count: step.output.length, lines: seen.split('\n') })
      } else {
        assertOutput(seen, step.output, where)
      }
    }
  } finally {
    agent.destroy()
    if (server !== undefined) {
      const exit = await server.stop()
      assert.equal(exit.code, 0, `${block.file}:${block.line}: the service's exit code`)
    }
  }
}

/** The rows of the first table under `## heading`, as trimmed cells. */
function tableUnder(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n')
  let at = lines.indexOf(`## ${heading}`)
  assert.notEqual(at, -1, `README.md has no '## ${heading}' section`)
  while (at < lines.length && !(lines[at] as string).startsWith('|')) at++
  const rows: string[][] = []
  for (; at < lines.length && (lines[at] as string).startsWith('|'); at++) {
    rows.push(
      (lines[at] as string)
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    )
  }
  return rows.slice(2)
}

/** '`0`-`65535`' -> '0-65535'; '`fatal`, `error`' -> 'fatal, error' */
const plain = (cell: string): string => cell.replaceAll('`', '')

/** Every `code` span of a text. */
const codeSpans = (text: string): string[] =>
  [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string)

/** A boolean option's parser, from the table. */
function booleanParser(): Option<Setting>['parse'] {
  const option = OPTIONS.find((o) => typeof o.default === 'boolean')
  assert.ok(option, 'OPTIONS has a boolean option')
  return option.parse
}

for (const file of DOCUMENTS) {
  describe(`the examples in ${file}`, () => {
    const text = readFileSync(join(ROOT, file), 'utf8')
    const blocks = fencedBlocks(text, file)

    it('are console examples (run here) or sh instructions, nothing else', () => {
      for (const block of blocks) {
        assert.ok(
          block.lang === 'console' || block.lang === 'sh',
          `${file}:${block.line}: a \`\`\`${block.lang} block is neither run nor allowed`,
        )
      }
      assert.ok(blocks.some((b) => b.lang === 'console'))
    })

    for (const block of blocks.filter((b) => b.lang === 'console')) {
      const env = Object.keys(block.env).length === 0 ? '' : ` with ${JSON.stringify(block.env)}`
      it(`at line ${block.line}${env}: what the service answers`, { timeout: 60_000 }, async () => {
        await runBlock(block)
      })
    }
  })
}

/** Every document a reader is sent to from the README. */
const LINKED = [...DOCUMENTS, 'docs/architecture.md', 'docs/hardening.md', 'bench/README.md']

/** GitHub's anchor of a heading: "Node's nextTick (`x.ts`)" -> "nodes-nexttick-xts" */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replaceAll(' ', '-')
}

/** The anchors of a markdown text's headings (outside code blocks). */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  let inCode = false
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) inCode = !inCode
    const heading = inCode ? null : /^#{1,6} (.*)$/.exec(line)
    if (heading !== null) anchors.add(anchorOf(heading[1] as string))
  }
  return anchors
}

describe('the documents the README links to', () => {
  for (const file of LINKED) {
    it(`${file} links only to files and headings of this repository that exist, and to the web`, () => {
      const text = readFileSync(join(ROOT, file), 'utf8')
      for (const [, link] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (link === undefined || /^https?:\/\//.test(link)) continue
        const [path, anchor] = link.split('#') as [string, string | undefined]
        const target = path === '' ? join(ROOT, file) : join(dirname(join(ROOT, file)), path)
        assert.ok(
          !relative(ROOT, target).startsWith('..'),
          `${file}: ${link} leaves the repository`,
        )
        assert.ok(existsSync(target), `${file}: ${link} exists`)
        if (anchor !== undefined) {
          const anchors = anchorsOf(readFileSync(target, 'utf8'))
          assert.ok(
            anchors.has(anchor),
            `${file}: ${link} names a heading of ${relative(ROOT, target)}`,
          )
        }
      }
    })
  }
})

describe('README.md', () => {
  it('lists every setting of OPTIONS in the configuration table, as --help and the parser say', async () => {
    const rows = tableUnder(README, 'Configuration')
    const help = (await runCli(['--help'], {})).output
    assert.deepEqual(
      rows.map((row) => plain(row[0] as string)),
      OPTIONS.map((o) => o.env),
      'the table lists the options of OPTIONS, in order',
    )
    for (const [i, option] of OPTIONS.entries()) {
      const [, flag, defaultCell, accepts] = rows[i] as string[]
      const where = `the ${option.env} row`
      assert.equal(plain(flag as string), option.flag, where)
      const shown = new RegExp(`^ {6}env ${option.env}, default (.*?); `, 'm').exec(help)?.[1]
      assert.ok(shown !== undefined, `--help shows ${option.env}`)
      assert.match(plain(defaultCell as string), new RegExp(`^${escapeRegExp(shown)}( |$)`), where)
      const accepted = plain(accepts as string)
      const range = /^(\d+)-(\d+)$/.exec(accepted)
      if (range !== null) {
        const [min, max] = [Number(range[1]), Number(range[2])]
        assert.equal(option.parse(String(min)), min, `${where}: min`)
        assert.equal(option.parse(String(max)), max, `${where}: max`)
        assert.ok(isRejection(option.parse(String(max + 1))), `${where}: above max`)
        if (min > 0) assert.ok(isRejection(option.parse(String(min - 1))), `${where}: below min`)
      } else if (accepted === 'boolean') {
        assert.equal(typeof option.default, 'boolean', where)
      } else {
        for (const value of codeSpans(accepts as string).filter((v) => !v.startsWith('http'))) {
          assert.ok(!isRejection(option.parse(value)), `${where}: ${value} is accepted`)
        }
      }
    }
  })

  it('says which values a boolean accepts, all of them, and that a flag alone is true', () => {
    const sentence = /Booleans accept ([^;]*);/.exec(README.replaceAll('\n', ' '))?.[1]
    assert.ok(sentence, 'README.md has a "Booleans accept ...;" sentence')
    const parse = booleanParser()
    const listed = new Set<string>()
    for (const pair of sentence.matchAll(/`([^`]+)`\/`([^`]+)`/g)) {
      const [, yes, no] = pair as unknown as [string, string, string]
      listed.add(yes).add(no)
      assert.equal(parse(yes), true, yes)
      assert.equal(parse(no), false, no)
      if (sentence.includes('in any case')) {
        assert.equal(parse(yes.toUpperCase()), true, yes.toUpperCase())
        assert.equal(parse(no.toUpperCase()), false, no.toUpperCase())
      }
    }
    const candidates = ['true', 'false', '1', '0', 'yes', 'no', 'on', 'off', 'y', 'n', 't', 'f']
    for (const candidate of [...candidates, 'enabled', 'disabled', 'enable', 'ok', '2', '-1']) {
      if (!isRejection(parse(candidate))) assert.ok(listed.has(candidate), `${candidate} is listed`)
    }
    assert.equal(loadConfig({}, ['--metrics']).metrics, true)
    assert.match(README, /a boolean flag alone is true/)
  })

  it('says what PATCH does per content type: application/json shallow, only a merge patch removes with null', () => {
    const sentences = README.replace(/\s+/g, ' ').split(/(?<=\.) /)
    const shallow = sentences.filter((s) => s.startsWith('- PATCH with `application/json`'))
    assert.equal(shallow.length, 1, 'one sentence says what PATCH with application/json does')
    assert.match(
      shallow[0] as string,
      /merges shallowly: each body field replaces the stored field/,
    )
    assert.match(shallow[0] as string, /a `null` is stored as `null`/)
    const removing = sentences.filter((s) => s.includes('`null` removes'))
    assert.ok(removing.length > 0, 'a sentence says when null removes a field')
    for (const sentence of removing) {
      assert.match(sentence, /^Only `Content-Type: application\/merge-patch\+json` applies/)
    }
  })

  it('names -h and -v, which do what --help and --version do', async () => {
    assert.match(README, /`--help` \(or `-h`\)/)
    assert.match(README, /`-v` is `--version`/)
    assert.deepEqual(await runCli(['-h'], {}), await runCli(['--help'], {}))
    assert.deepEqual(await runCli(['-v'], {}), await runCli(['--version'], {}))
  })
})

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
