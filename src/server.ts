// First, before anything else runs: keeps Node's nextTick fast for the life of the process.
import './http/tick-shapes.js'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, userTokensOn } from './config/config.js'
import { listenErrorMessage } from './config/listen-error.js'
import { loggerOptions } from './ops/logger.js'
import { UserTokens } from './ops/user-tokens.js'
import { JournalOpenError } from './store/journal/journal-open-error.js'
import { SHARED_NOTEBOOK } from './store/journal/journal-records.js'
import { JournaledNotebooks } from './store/journal/journaled-notebooks.js'
import { MemoryNoteStore } from './store/memory.js'
import { MemoryNotebooks } from './store/memory-notebooks.js'
import { openFailure, redactUrl } from './store/postgres/connection.js'
import { PostgresNotebooks } from './store/postgres/notebooks.js'
import { PostgresNoteStore } from './store/postgres/store.js'

let config: ReturnType<typeof loadConfig>
try {
  config = loadConfig(process.env, process.argv.slice(2))
} catch (err) {
  if (!(err instanceof ConfigError)) throw err
  process.stderr.write(`notes-service: ${err.message}\n`)
  process.exit(2)
}

// With user tokens on, a notebook per user (and the shared one for service keys).
const userTokens = !userTokensOn(config)
  ? undefined
  : config.authJwtSecret !== ''
    ? new UserTokens({
        secret: config.authJwtSecret,
        ...(config.authIssuer === '' ? {} : { issuer: config.authIssuer }),
        ...(config.authAudience === '' ? {} : { audience: config.authAudience }),
      })
    : new UserTokens({
        jwksUrl: new URL(config.authJwksUrl),
        issuer: config.authIssuer,
        audience: config.authAudience,
      })
const caps = {
  maxNotes: config.maxNotes,
  maxBytes: config.maxStoreBytes,
  historyLimit: config.changeHistory,
}
const perUser = {
  maxNotesPerNotebook: config.maxNotesPerUser,
  maxBytesPerNotebook: config.maxBytesPerUser,
}
const database = {
  url: config.databaseUrl,
  poolSize: config.databasePoolSize,
  statementTimeoutMs: config.databaseStatementTimeoutMs,
}
const postgres =
  config.databaseUrl === ''
    ? undefined
    : userTokens === undefined
      ? new PostgresNoteStore({ ...caps, ...database })
      : new PostgresNotebooks({ ...caps, ...database, ...perUser })
// DECISION 37: the journal is opened (locked, replayed) before anything listens.
let journaled: JournaledNotebooks | undefined
// A lock held through a lease (another container, or this one before a restart: a new PID
// namespace) is waited for once; renewed meanwhile, its holder runs, and start-up stops.
for (let waited = false; config.dataFile !== '' && journaled === undefined; waited = true) {
  try {
    journaled = new JournaledNotebooks({
      ...caps,
      ...(userTokens === undefined ? {} : perUser),
      path: config.dataFile,
    })
  } catch (err) {
    if (!(err instanceof JournalOpenError)) throw err
    if (err.leaseEndsAt === undefined || waited) {
      process.stderr.write(`notes-service: ${err.message}\n`)
      process.exit(2)
    }
    process.stderr.write(`notes-service: ${err.message} Waiting until then.\n`)
    const ms = Math.max(0, err.leaseEndsAt - Date.now()) + 100
    await new Promise((resolve) => setTimeout(resolve, ms))
  }
}
const stores =
  journaled !== undefined
    ? userTokens === undefined
      ? { store: journaled.notebook(SHARED_NOTEBOOK) }
      : { notebooks: journaled, userTokens }
    : postgres instanceof PostgresNotebooks
      ? { notebooks: postgres, userTokens: userTokens as UserTokens }
      : postgres !== undefined
        ? { store: postgres }
        : userTokens !== undefined
          ? { notebooks: new MemoryNotebooks({ ...caps, ...perUser }), userTokens }
          : { store: new MemoryNoteStore(caps) }
const app = buildApp({
  ...stores,
  config,
  logger: loggerOptions(config.logLevel, process.stdout),
})

if (journaled !== undefined) {
  const { dropped } = journaled
  if (dropped !== undefined) {
    app.log.warn(
      { dataFile: config.dataFile, offset: dropped.offset, bytes: dropped.bytes },
      'DATA_FILE ended in a torn record (a crash mid-write); it was dropped',
    )
  }
  app.log.info({ dataFile: config.dataFile, notes: journaled.stats().notes }, 'journal opened')
  const store = journaled
  app.addHook('onClose', async () => store.close())
}

if (postgres !== undefined) {
  // DECISION 27: start-up waits (bounded) for the database and applies the migrations before it
  // listens, so no instance takes traffic it cannot serve.
  const database = redactUrl(config.databaseUrl)
  app.log.info({ database }, 'opening the PostgreSQL store')
  const started = Date.now()
  try {
    await postgres.open({
      timeoutMs: config.databaseConnectTimeoutMs,
      retryMs: config.databaseConnectRetryMs,
    })
  } catch (err) {
    // A setting is named only when the user set it: a default they never chose tells them nothing.
    const timeoutSet =
      process.env.DATABASE_CONNECT_TIMEOUT_MS !== undefined ||
      process.argv.some((arg) => /^--database-connect-timeout-ms(=|$)/.test(arg))
    const reason = openFailure(err, {
      waitedMs: Date.now() - started,
      timeoutMs: timeoutSet ? config.databaseConnectTimeoutMs : undefined,
    })
    process.stderr.write(`notes-service: cannot open the database ${database}: ${reason}\n`)
    await postgres.close().catch(() => {})
    process.exit(1)
  }
  app.addHook('onClose', async () => postgres.close())
}

let shuttingDown = false
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (shuttingDown) return
  shuttingDown = true
  app.log.info({ signal }, 'shutting down: finishing requests in flight')
  // Past the deadline, cut the remaining connections so the exit stays bounded.
  const deadline = setTimeout(() => {
    app.log.warn('shutdown deadline reached: closing the remaining connections')
    app.server.closeAllConnections()
  }, config.shutdownTimeoutMs)
  deadline.unref()
  try {
    await app.close()
    app.log.info('stopped')
    process.exitCode = 0
  } catch (err) {
    app.log.error({ err }, 'shutdown failed')
    process.exitCode = 1
  } finally {
    clearTimeout(deadline)
  }
}

process.once('SIGTERM', (signal) => void shutdown(signal))
process.once('SIGINT', (signal) => void shutdown(signal))

try {
  await app.listen({ port: config.port, host: config.host })
} catch (err) {
  // A port in use or a host that is not ours is the setting's fault, told in one line (exit 2
  // like any bad setting); anything else is a bug, logged with its stack.
  const message = listenErrorMessage(err, config)
  if (message === undefined) {
    app.log.fatal({ err }, 'could not start listening')
    process.exit(1)
  }
  process.stderr.write(`notes-service: ${message}\n`)
  process.exit(2)
}
