/**
 * Entry point: reads the environment once, builds the app, listens, says where it serves, and
 * shuts down gracefully on SIGTERM/SIGINT (plugins/lifecycle.ts: drain, stop accepting, let
 * in-flight requests finish, close the store clients), with a hard deadline in case a shutdown
 * hangs. A start-up failure is one readable line and a hint on stderr (exit 2 for a bad
 * setting, 1 for anything else), never a stack trace.
 */
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import { ConfigError, loadConfig, type Config } from './config.js'
import { StartupError } from './core/errors.js'
import { startupBanner } from './http/banner.js'

function fail (message: string, hint: string | undefined, code: number): never {
  process.stderr.write(`dropcode: ${message}${hint !== undefined ? ` (hint: ${hint})` : ''}\n`)
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
  await app.listen({ host: config.host, port: config.port }).catch(err => { throw listenError(err as NodeJS.ErrnoException, config) })
} catch (err) {
  if (err instanceof StartupError) fail(err.message, err.hint, 1)
  fail(`could not start: ${(err as Error).message}`, 'run with LOG_LEVEL=debug for details', 1)
}

process.stderr.write(startupBanner(config, app.server.address()))

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    // SIGINT is a person at a terminal: no balancer to wait for.
    const drainMs = signal === 'SIGTERM' ? config.drainDelayMs : 0
    const hardDeadline = setTimeout(() => {
      app.log.error('shutdown did not finish in time: exiting')
      process.exit(1)
    }, drainMs + config.shutdownGraceMs + 15_000)
    hardDeadline.unref()
    app.lifecycle.shutdown({ drainMs, graceMs: config.shutdownGraceMs }).then(() => process.exit(0), err => {
      app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  })
}
