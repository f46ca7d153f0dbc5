/**
 * Entry point: reads the environment once, builds the app, listens (the service port, then the
 * metrics port: server/metrics-listener.ts), says where it serves, and
 * shuts down gracefully on SIGTERM/SIGINT (plugins/lifecycle.ts: drain, stop accepting, let
 * in-flight requests finish, close the store clients), with a hard deadline in case a shutdown
 * hangs. A start-up failure is one readable line and a hint on stderr (exit 2 for a bad
 * setting, 1 for anything else), never a stack trace. An exception nothing caught is logged at
 * level fatal and ends the process with exit 1 (a supervisor restarts it).
 *
 * Every exit closes the stores first. process.exit waits for libuv's thread pool, and an LMDB
 * write in flight waits in that pool for this thread to run its transaction (lmdb-js issue
 * #336): exiting with one in flight hung for ever, still holding the port. Closing LMDB lets
 * the writes in flight finish; if closing takes longer than EXIT_CLOSE_MS the process kills
 * itself, which loses nothing answered (every answer follows a commit).
 */
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { StartupError } from './core/errors.js'
import { startupBanner } from './server/banner.js'
import { listenError } from './server/listen-error.js'
import { startMetricsListener, type MetricsListener } from './server/metrics-listener.js'

const EXIT_CLOSE_MS = 5000

/** A start-up failure before anything is open (buildApp closes what it opened if it fails). */
function fail (message: string, hint: string | undefined, code: number): never {
  process.stderr.write(startupLine(message, hint))
  process.exit(code)
}

const startupLine = (message: string, hint: string | undefined) => `dropcode: ${message}${hint !== undefined ? ` (hint: ${hint})` : ''}\n`

/** Exits with `code` once `close` (the stores, or the whole app) is done; see the top. */
async function exitAfter (close: () => Promise<unknown>, code: number): Promise<never> {
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), EXIT_CLOSE_MS)
  await close().catch(() => {})
  process.exit(code)
}

let config: Config
try {
  config = loadConfig(process.env)
} catch (err) {
  if (err instanceof ConfigError) fail(err.message, 'see docs/configuration.md', 2)
  throw err
}

let app: FastifyInstance
try {
  app = await buildApp(config)
} catch (err) {
  if (err instanceof StartupError) fail(err.message, err.hint, 1)
  fail(`could not start: ${(err as Error).message}`, 'run with LOG_LEVEL=debug for details', 1)
}

let metrics: MetricsListener | undefined
// Closed with the app, after its own listener: scrapes go on while the instance drains.
app.addHook('onClose', async () => { await metrics?.close() })

/**
 * Connections the kernel may hold completed before they are accepted. Node's default, 511, is
 * overrun by a burst (2,000 uploads at once, or any stall of the event loop while they connect):
 * Linux then answers with SYN cookies, and a connection whose cookie is checked after the queue
 * has overflowed is reset (`ECONNRESET` for a client already sending its body). Linux caps this
 * at net.core.somaxconn (4096 since 5.4).
 */
const LISTEN_BACKLOG = 4096

try {
  await app.listen({ host: config.host, port: config.port, backlog: LISTEN_BACKLOG })
} catch (err) {
  const { message, hint } = listenError(err as NodeJS.ErrnoException, { host: config.host, port: config.port, hostSetting: 'HOST', portSetting: 'PORT', unprivileged: 3000 })
  process.stderr.write(startupLine(message, hint))
  await exitAfter(() => app.close(), 1)
}

// After the service port, so that a second instance started by mistake is told about PORT.
if (config.metrics !== false) {
  try {
    metrics = await startMetricsListener(app.metrics.registry, config.metrics, app.log)
  } catch (err) {
    const { message, hint } = err instanceof StartupError ? err : { message: `could not start the metrics listener: ${(err as Error).message}`, hint: 'or METRICS_PORT=off' }
    process.stderr.write(startupLine(message, hint))
    await exitAfter(() => app.close(), 1)
  }
}

let crashing = false
process.on('uncaughtException', err => {
  app.log.fatal({ err }, crashing ? 'another uncaught exception while exiting' : 'uncaught exception: closing the state store and exiting')
  if (crashing) return
  crashing = true
  exitAfter(() => app.state.close(), 1).catch(() => {})
})

process.stderr.write(startupBanner(config, app.server.address(), metrics?.address, app.keptAdminKey))

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (crashing) return // exiting already
    // SIGINT is a person at a terminal: no balancer to wait for.
    const drainMs = signal === 'SIGTERM' ? config.drainDelayMs : 0
    const hardDeadline = setTimeout(() => {
      app.log.error('shutdown did not finish in time: exiting')
      exitAfter(() => app.state.close(), 1).catch(() => {})
    }, drainMs + config.shutdownGraceMs + 15_000)
    hardDeadline.unref()
    // A finished shutdown closed the stores (lifecycle.ts).
    app.lifecycle.shutdown({ drainMs, graceMs: config.shutdownGraceMs }).then(() => {
      app.log.info('stopped') // written at exit with the rest of its batch (logging.ts)
      process.exit(0)
    }, err => {
      app.log.error({ err }, 'shutdown failed')
      exitAfter(() => app.state.close(), 1).catch(() => {})
    })
  })
}
