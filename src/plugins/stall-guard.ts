/**
 * Cuts requests whose connection moves no byte, either way, for STALL_MS: a client that stops
 * mid-body (or stops reading a download) must not hold a stream, a chunk lock or a temp file
 * for ever. A watchdog checks the sockets of running requests every second instead of arming
 * socket timeouts, because a socket timeout keeps fastify's close() from ending idle keep-alive
 * connections. Between requests, keepAliveTimeout closes idle sockets.
 *
 * Nothing is attached to a socket per request: a keep-alive connection from a load balancer
 * carries millions of requests, and a listener per request accumulates (Node warns from the
 * 11th, and memory grows). Each socket gets one 'close' listener, when it connects.
 */
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** ms without traffic after which a running request's connection is cut. */
export const STALL_MS = 120_000

declare module 'fastify' {
  interface FastifyRequest {
    /** Exempts this request from the stall guard (it may legitimately stay silent for long). */
    allowSilence (): void
  }
}

export default fp(async function stallGuard (app: FastifyInstance, opts: { stallMs?: number }) {
  const stallMs = opts.stallMs ?? STALL_MS
  const watched = new Map<Socket, { bytes: number, since: number }>()
  const traffic = (s: Socket) => s.bytesRead + s.bytesWritten
  // Checked often, so a stalled request is cut within a second of STALL_MS (not up to an
  // eighth later, as with a coarser tick).
  const timer = setInterval(() => {
    const now = Date.now()
    for (const [socket, seen] of watched) {
      const bytes = traffic(socket)
      if (bytes !== seen.bytes) watched.set(socket, { bytes, since: now })
      else if (now - seen.since >= stallMs) {
        watched.delete(socket)
        socket.destroy()
      }
    }
  }, Math.min(1000, stallMs / 8))
  timer.unref()
  app.addHook('onClose', async () => clearInterval(timer))
  app.server.on('connection', (socket: Socket) => { socket.once('close', () => watched.delete(socket)) })

  app.decorateRequest('allowSilence', function () { watched.delete(this.raw.socket) })
  app.addHook('onRequest', async req => {
    const socket = req.raw.socket
    watched.set(socket, { bytes: traffic(socket), since: Date.now() })
  })
  app.addHook('onResponse', async req => { watched.delete(req.raw.socket) })
}, { name: 'stall-guard' })
