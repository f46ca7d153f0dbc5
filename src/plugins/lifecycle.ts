/**
 * The instance's lifecycle: serving → draining → closing → closed. Owns the draining state
 * that /readyz reports and the shutdown sequence that server.ts starts on SIGTERM/SIGINT:
 *
 * 1. draining: /readyz answers 503 `{"status":"draining"}` for `drainMs` while every other
 *    request is served as usual, so a load balancer takes the instance out of rotation;
 * 2. closing: the listener stops accepting; idle keep-alive connections are closed, and every
 *    response that finishes from now on says `Connection: close` and ends its connection;
 *    requests already running get `graceMs` to finish (a cut download has been counted once,
 *    a cut upload leaves nothing);
 * 3. after the grace period, the remaining connections are cut and the stores close.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export interface Lifecycle {
  /** True from the start of a shutdown: /readyz answers 503. */
  readonly draining: boolean
  /** Runs the shutdown sequence; resolves once the app is closed. */
  shutdown (opts: { drainMs: number, graceMs: number }): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle
  }
}

export default fp(async function lifecycle (app: FastifyInstance) {
  let draining = false
  let closing = false
  let shutdown: Promise<void> | undefined
  app.addHook('preClose', async () => { draining = true; closing = true })
  // close() ends the connections that are idle when it starts; one whose response is still
  // running would otherwise stay open until keepAliveTimeout. Tell its client, and end it.
  app.addHook('onSend', async (_req, reply) => { if (closing) reply.header('connection', 'close') })
  app.addHook('onResponse', async req => { if (closing) req.raw.socket.end() })

  app.decorate('lifecycle', {
    get draining () { return draining },
    shutdown ({ drainMs, graceMs }) {
      shutdown ??= (async () => {
        draining = true
        app.log.info({ drainMs, graceMs }, 'shutting down: draining (readyz answers 503)')
        await new Promise(resolve => setTimeout(resolve, drainMs))
        app.log.info('closing the listener; in-flight requests may finish')
        // Transfers still running after the grace period (a stalled client, say) are cut, so a
        // shutdown always ends.
        const cut = setTimeout(() => {
          app.log.warn('grace period over: closing remaining connections')
          app.server.closeAllConnections()
        }, graceMs)
        cut.unref()
        try {
          await app.close()
        } finally {
          clearTimeout(cut)
        }
      })()
      return shutdown
    }
  } satisfies Lifecycle)
}, { name: 'lifecycle' })
