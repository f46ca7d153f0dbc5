/**
 * Entry point: reads the environment once, builds the app, listens, says where it serves, and
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
import { startupBanner } from './http/banner.js'

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

/** A listen() failure as a StartupError. */
function listenError (err: NodeJS.ErrnoException, config: Config): StartupError {
  const where = `port ${config.port} on ${config.host}`
  if (err.code === 'EADDRINUSE') return new StartupError(`${where} is already in use (PORT)`, 'stop the other server there, or choose another PORT')
  if (err.code === 'EACCES') return new StartupError(`not allowed to listen on ${where} (PORT)`, 'ports below 1024 need privileges: use PORT=3000 behind a proxy')
  if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') return new StartupError(`cannot listen on ${config.host} (HOST): ${err.code}`, 'use an address of this machine, 127.0.0.1 or 0.0.0.0')
  return new StartupError(`cannot listen on ${where}: ${err.code ?? err.message}`, 'check HOST and PORT', { cause: err })
}

let config: Config
try {
  config = loadConfig(process.env)
} catch (err) {
  if (err instanceof ConfigError) fail(err.message, 'see "Configuration" in the README', 2)
  throw err
}

let app: FastifyInstance
try {
  app = await buildApp(config)
} catch (err) {
  if (err instanceof StartupError) fail(err.message, err.hint, 1)
  fail(`could not start: ${(err as Error).message}`, 'run with LOG_LEVEL=debug for details', 1)
}

try {
  await app.listen({ host: config.host, port: config.port })
} catch (err) {
  const { message, hint } = listenError(err as NodeJS.ErrnoException, config)
  process.stderr.write(startupLine(message, hint))
  await exitAfter(() => app.close(), 1)
}

let crashing = false
process.on('uncaughtException', err => {
  app.log.fatal({ err }, crashing ? 'another uncaught exception while exiting' : 'uncaught exception: closing the state store and exiting')
  if (crashing) return
  crashing = true
  exitAfter(() => app.state.close(), 1).catch(() => {})
})

process.stderr.write(startupBanner(config, app.server.address()))

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
    app.lifecycle.shutdown({ drainMs, graceMs: config.shutdownGraceMs }).then(() => process.exit(0), err => {
      app.log.error({ err }, 'shutdown failed')
      exitAfter(() => app.state.close(), 1).catch(() => {})
    })
  })
}
