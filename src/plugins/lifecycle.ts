/**
 * The instance's lifecycle: serving → draining → closing → closed. Owns the draining state
 * that /readyz reports and the shutdown sequence that server.ts starts on SIGTERM/SIGINT:
 *
 * 1. draining: /readyz answers 503 `{"status":"draining"}` for `drainMs` while every other
 *    request is served as usual, so a load balancer takes the instance out of rotation;
 * 2. closing: the listener stops accepting; idle keep-alive connections are closed, and so are
 *    connections that never sent a byte (Node counts them neither idle nor busy, so they held a
 *    shutdown up to its grace period: a balancer's or a pool's connection opened ahead of use);
 *    every response that finishes from now on says `Connection: close` and ends its connection;
 *    requests already running get `graceMs` to finish (a cut download has been counted once,
 *    a cut upload leaves nothing);
 * 3. after the grace period, the remaining connections are cut and the stores close.
 */
import type { Socket } from 'node:net'
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
  // Open sockets, so that those that never sent a byte can be closed with the listener. One
  // 'close' listener each (no 'data' listener: Node's parser reads the socket itself).
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.addHook('preClose', async () => {
    draining = true
    closing = true
    // After fastify's server.close() (which runs once the preClose hooks are done): no new
    // connection can arrive, so none of these is a request about to be served.
    setImmediate(() => { for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy() })
  })
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
