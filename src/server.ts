/**
 * Entry point: reads the environment once, builds the app, listens, and shuts down gracefully
 * on SIGTERM/SIGINT (stop accepting, let in-flight requests finish, close the store clients).
 */
import { buildApp } from './app.js'
import { ConfigError, loadConfig } from './config.js'

let config
try {
  config = loadConfig(process.env)
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`dropcode: ${err.message}\n`)
    process.exit(2)
  }
  throw err
}

const app = await buildApp(config)
if (config.apiKeyGenerated) {
  app.log.warn({ apiKey: config.apiKeys[0] }, 'API_KEYS is not set: generated a key for this run only; send it as X-Client-Key')
}
app.log.info({ storage: config.storage.driver, state: config.state.driver, dataDir: config.dataDir }, 'drivers selected')

let closing = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    if (closing) return
    closing = true
    app.log.info({ signal, graceMs: config.shutdownGraceMs }, 'shutting down: finishing in-flight requests')
    app.startDraining()
    // Transfers still running after the grace period (a stalled client, say) are cut, so a
    // shutdown always ends; a cut download has been counted, a cut upload leaves nothing.
    setTimeout(() => {
      app.log.warn('grace period over: closing remaining connections')
      app.server.closeAllConnections()
    }, config.shutdownGraceMs).unref()
    app.close().then(() => process.exit(0), err => {
      app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  })
}

await app.listen({ host: config.host, port: config.port })
