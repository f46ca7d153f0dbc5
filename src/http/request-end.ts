/**
 * How a request ended (core/model.ts `RequestEnd`): `complete` (the response was delivered),
 * `client` (the client went away first: it closed or reset its connection) or `server` (we cut
 * the connection: the stall guard, the minimum-rate cut, a shutdown's grace period running out,
 * a stream that failed after its headers went out).
 *
 * Read when the response closes, from what the connection saw: a client that leaves either
 * closes its side (its FIN reached us: the socket's reading side ended) or resets it (a read or
 * write failed: ECONNRESET, EPIPE). When we cut, we destroy the socket without either having
 * happened. So no cut needs to tell the log who made it, and a cut added later is classified too.
 */
import type { ServerResponse } from 'node:http'
import type { RequestEnd } from '../core/model.js'

/**
 * @param sentBytes response body bytes that went out (http/sent-bytes.ts)
 */
export function requestEnd (res: ServerResponse, sentBytes: number): RequestEnd {
  if (res.writableFinished) return 'complete'
  // Clients that have their Content-Length bytes may close before we end the response (curl
  // does, as soon as the last byte arrives): delivered all the same.
  const declared = Number(res.getHeader('content-length'))
  if (res.headersSent && declared > 0 && sentBytes >= declared) return 'complete'
  const socket = res.req.socket
  // ECANCELED is no client's doing: it is the writes our own reset cancelled (the stall guard
  // cuts a response under way with a reset; Node 22+ then reports the queued writes so).
  const error = (socket.errored as NodeJS.ErrnoException | null)?.code
  return socket.readableEnded || (error !== undefined && error !== 'ECANCELED') ? 'client' : 'server'
}
