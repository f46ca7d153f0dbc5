/**
 * Cuts running requests whose client holds the server up: a connection that moves no byte,
 * either way, for STALL_MS; and one whose client owes bytes (a request body still coming, or a
 * response it is not reading) but moves fewer than `minRate.bytes` in a window of
 * `minRate.windowMs` (Apache's mod_reqtimeout MinRate; nginx has only the no-byte timeouts). A
 * client that sends one byte a minute must not hold a slot, upload memory, a chunk lock or a
 * temp file for ever.
 *
 * Only time the client is responsible for counts towards the rate: while the server itself is
 * behind (the body complete and storage still working, unread request bytes buffered, nothing
 * queued for the client), the window starts over. The first window starts with the request,
 * so a new request has a whole window to get going (its start grace).
 *
 * A watchdog checks the sockets of running requests every second instead of arming socket
 * timeouts, because a socket timeout keeps fastify's close() from ending idle keep-alive
 * connections. Between requests, keepAliveTimeout closes idle sockets.
 *
 * Nothing is attached to a socket per request: a keep-alive connection from a load balancer
 * carries millions of requests, and a listener per request accumulates (Node warns from the
 * 11th, and memory grows). Each socket gets one 'close' listener, when it connects.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** ms without traffic after which a running request's connection is cut. */
export const STALL_MS = 120_000

export interface MinRate {
  /** Bytes a client owing bytes must move per window; 0 turns the rule off. */
  bytes: number
  /** ms of one window. */
  windowMs: number
}

/**
 * One per connection, kept from its first request to its close and reused by each request on
 * it: a new entry per request, set and deleted, was a visible share of a 404 (Map churn; issue 21).
 */
interface Watch {
  /** A request is running on the connection (the fields below are its own); else the entry waits. */
  running: boolean
  req: IncomingMessage | null
  res: ServerResponse | null
  /** The request's logger (its id bound), to say why a connection was cut. */
  log: FastifyBaseLogger | null
  /** Traffic (bytes both ways) and when it last moved: the no-byte rule. */
  bytes: number
  since: number
  /** Traffic and time at the start of the current rate window. */
  windowBytes: number
  windowStart: number
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Exempts this request from the stall guard (it may legitimately stay silent for long). */
    allowSilence (): void
  }
}

const traffic = (s: Socket) => s.bytesRead + s.bytesWritten

/**
 * True while the transfer waits on the client: its body is still coming and the server has
 * read all that arrived, or response bytes are queued that the client has not taken.
 */
const clientOwes = (req: IncomingMessage, socket: Socket) =>
  (!req.complete && req.readableLength === 0) || socket.writableLength > 0

export default fp(async function stallGuard (app: FastifyInstance, opts: { stallMs?: number, minRate?: MinRate }) {
  const stallMs = opts.stallMs ?? STALL_MS
  const minRate = opts.minRate ?? { bytes: 0, windowMs: 1 }
  const watched = new Map<Socket, Watch>()
  // Checked often, so a request is cut within a second of its bound (not up to an eighth
  // later, as with a coarser tick).
  const timer = setInterval(() => {
    const now = Date.now()
    for (const [socket, w] of watched) {
      if (!w.running) continue
      const bytes = traffic(socket)
      if (bytes !== w.bytes) {
        w.bytes = bytes
        w.since = now
      } else if (now - w.since >= stallMs) {
        w.log!.warn({ stallMs, idleMs: now - w.since }, 'connection cut: no byte moved')
        cut(socket, w)
        continue
      }
      if (minRate.bytes === 0) continue
      if (!clientOwes(w.req!, socket)) {
        w.windowBytes = bytes
        w.windowStart = now
      } else if (now - w.windowStart >= minRate.windowMs) {
        if (bytes - w.windowBytes < minRate.bytes) {
          w.log!.warn({ movedBytes: bytes - w.windowBytes, minBytes: minRate.bytes, windowMs: minRate.windowMs }, 'connection cut: under the minimum transfer rate')
          cut(socket, w)
        }
        w.windowBytes = bytes
        w.windowStart = now
      }
    }
  }, Math.min(1000, stallMs / 8, minRate.windowMs / 4))
  timer.unref()
  // A response under way ends with a reset (RST), not a close (FIN): what is queued for a
  // reader that stopped reading would stay in the kernel behind the FIN (megabytes per
  // connection, for minutes of zero-window probes), and a proxy in front that had stopped
  // reading this connection would not see it end: HAProxy 2.6 kept such clients' connections
  // open indefinitely (test/e2e/balancers/fairness.test.ts). A reset reaches the peer at once and
  // frees both. A request still coming in has nothing queued: a close, which a proxy in front
  // answers its client with a 502.
  function cut (socket: Socket, w: Watch): void {
    watched.delete(socket)
    if (w.res!.headersSent) socket.resetAndDestroy()
    else socket.destroy()
  }
  app.addHook('onClose', async () => clearInterval(timer))
  app.server.on('connection', (socket: Socket) => { socket.once('close', () => watched.delete(socket)) })

  app.decorateRequest('allowSilence', function () { rest(this.raw.socket) })
  app.addHook('onRequest', (req, reply, done) => {
    const socket = req.raw.socket
    const now = Date.now()
    const bytes = traffic(socket)
    const w = watched.get(socket)
    if (w === undefined) {
      watched.set(socket, { running: true, req: req.raw, res: reply.raw, log: req.log, bytes, since: now, windowBytes: bytes, windowStart: now })
    } else {
      w.running = true
      w.req = req.raw
      w.res = reply.raw
      w.log = req.log
      w.bytes = w.windowBytes = bytes
      w.since = w.windowStart = now
    }
    done()
  })
  app.addHook('onResponse', (req, _reply, done) => { rest(req.raw.socket); done() })
  /** No request of `socket` is watched until its next one (nor held in memory). */
  function rest (socket: Socket): void {
    const w = watched.get(socket)
    if (w === undefined) return
    w.running = false
    w.req = w.res = w.log = null
  }
}, { name: 'stall-guard' })
