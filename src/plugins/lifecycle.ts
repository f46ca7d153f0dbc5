/**
 * The instance's lifecycle: serving → draining → closing → closed. Owns the draining state
 * that /readyz reports and the shutdown sequence that server.ts starts on SIGTERM/SIGINT:
 *
 * 1. draining: /readyz answers 503 `{"status":"draining"}` for `drainMs` while every other
 *    request is served as usual, so a load balancer takes the instance out of rotation; every
 *    response that starts from now on says `Connection: close` and ends its connection, so
 *    that when the listener closes no balancer holds an idle keep-alive connection to us (a
 *    keep-alive connection whose response had started is left open: its next request is
 *    answered and told to close, see `listenerClosed`);
 * 2. closing: the listener stops accepting, right after the loop accepted what was waiting
 *    (`closeAfterPoll`, src/http/close-listener.ts); idle keep-alive connections are closed, and so are
 *    connections that have not sent a byte SILENT_GRACE_MS later (Node counts them neither idle
 *    nor busy, so they held a shutdown up to its grace period: a pool's connection opened ahead
 *    of use); requests already running get `graceMs` to finish (a cut download has been
 *    counted once, a cut upload leaves nothing);
 * 3. after the grace period, the remaining connections are cut and the stores close.
 */
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { closeAfterPoll } from '../http/close-listener.js'

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

/**
 * ms a connection that has not sent a byte when the listener closes gets to send one. A
 * balancer connects and then writes its request: destroyed at once, such a connection resets a
 * request already on its way, which nginx cannot pass to another instance when it is an upload
 * (502; test/e2e/balancers/rolling-restart.test.ts).
 */
const SILENT_GRACE_MS = 1000

export default fp(async function lifecycle (app: FastifyInstance) {
  let draining = false
  /** The listener is closed (or closing): see the onResponse hook. */
  let listenerClosed = false
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
    // fastify closes the listener right after this hook (a no-op after closeAfterPoll).
    listenerClosed = true
    // After fastify's server.close() (which runs once the preClose hooks are done): no new
    // connection can arrive. Those still silent after SILENT_GRACE_MS are nobody's request.
    setImmediate(() => {
      const silent = [...sockets].filter(socket => socket.bytesRead === 0)
      if (silent.length > 0) setTimeout(() => { for (const socket of silent) if (socket.bytesRead === 0) socket.destroy() }, SILENT_GRACE_MS)
    })
  })
  // From the start of the drain, every response says Connection: close and Node ends its
  // connection after it. A balancer then holds no idle keep-alive connection to this instance
  // when the listener closes: close() ends the idle ones, and one that a balancer is sending a
  // request on at that moment resets the request (nginx sends a GET to another instance, but
  // answers an upload 502: test/e2e/balancers/nginx-retry.test.ts).
  app.addHook('onSend', (_req, reply, payload, done) => { if (draining) reply.header('connection', 'close'); done(null, payload) })
  // A response that started before the drain went out without Connection: close, so the
  // balancer keeps its connection for the next request. Ending it when the response ends races
  // that request (nginx picks the connection before it reads our FIN: an upload is answered
  // 502), so while the listener is open it stays: its next request is answered and told to
  // close, and close() ends it if it is still idle. After the listener closed, close() ends no
  // connection that becomes idle later, so each one is ended as its response ends.
  app.addHook('onResponse', (req, _reply, done) => { if (listenerClosed) req.raw.socket.end(); done() })

  app.decorate('lifecycle', {
    get draining () { return draining },
    shutdown ({ drainMs, graceMs }) {
      shutdown ??= (async () => {
        draining = true
        app.log.info({ drainMs, graceMs }, 'shutting down: draining (readyz answers 503)')
        await new Promise(resolve => setTimeout(resolve, drainMs))
        await closeAfterPoll(app.server)
        listenerClosed = true
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
