// First, before anything else runs: keeps Node's nextTick fast for the life of the process.
import './http/tick-shapes.js'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from './app.js'
import { UserTokens } from './auth/user-tokens.js'
import { ConfigError } from './config/config.js'
import { listenErrorMessage } from './config/listen-error.js'
import { loadConfig, userTokensOn } from './config/load-config.js'
import { fileSweeper, type OpenedStores, openStores, StoreOpenError } from './open-stores.js'
import { loggerOptions } from './ops/logger.js'

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
        tokenTypes: config.authTokenTypes,
        writeScope: config.authWriteScope,
      })
    : new UserTokens({
        jwksUrl: new URL(config.authJwksUrl),
        issuer: config.authIssuer,
        audience: config.authAudience,
        tokenTypes: config.authTokenTypes,
        writeScope: config.authWriteScope,
      })
// The journal is opened (locked, replayed) before anything listens, and the database waited for
// and migrated, so that no instance takes traffic it cannot serve.
// A journal held through a lease (another container, or this one before a restart: a new PID
// namespace) is waited for once; renewed meanwhile, its holder runs, and start-up stops.
let opened: OpenedStores | undefined
for (let waited = false; opened === undefined; waited = true) {
  try {
    opened = openStores(config, { perUser: userTokens !== undefined })
  } catch (err) {
    if (!(err instanceof StoreOpenError) || err.leaseEndsAt === undefined || waited) exitWith(err)
    process.stderr.write(`notes-service: ${err.message} Waiting until then.\n`)
    await sleep(Math.max(0, err.leaseEndsAt - Date.now()) + 100)
  }
}
const app = buildApp({
  ...opened.stores,
  ...(userTokens === undefined ? {} : { userTokens }),
  config,
  logger: loggerOptions(config.logLevel, process.stdout),
})
app.addHook('onClose', async () => opened.close())
try {
  // On a failure, ready() has closed what it opened.
  await opened.ready(app.log)
} catch (err) {
  exitWith(err)
}

// Files no note refers to go once their grace has passed: swept at start-up, then at least once a
// minute (more often for a grace under 4 minutes).
const sweeper = fileSweeper(opened.stores, config.fileGraceHours * 3_600_000)
const sweepFiles = (): void => {
  sweeper.sweep().then(
    ({ files, uploads }) => {
      if (files > 0) app.log.info({ files }, 'removed files that no note refers to')
      if (uploads > 0) app.log.info({ uploads }, 'removed uploads past their lifetime')
    },
    (err: unknown) => app.log.warn({ err }, 'the sweep of files no note refers to failed'),
  )
}
const sweeps = setInterval(
  sweepFiles,
  Math.min(60_000, Math.max(1000, config.fileGraceHours * 900_000)),
)
sweeps.unref()
app.addHook('preClose', async () => clearInterval(sweeps))
sweepFiles()

/** A store that cannot be opened is told in one line; anything else is a bug, thrown. */
function exitWith(err: unknown): never {
  if (!(err instanceof StoreOpenError)) throw err
  process.stderr.write(`notes-service: ${err.message}\n`)
  process.exit(err.exitCode)
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
