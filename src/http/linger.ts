/**
 * Lingering close, as nginx and Apache do it. When dropcode answers a request before reading
 * its whole body (401 on a large upload, 413 over the limit, 400 for a bad field or too many
 * parts), it answers with `Connection: close`. Node would then close the socket as soon as the
 * answer is written, while the client is still sending: the client's next write fails (EPIPE or
 * a reset) and many clients (Node's fetch, browsers, urllib, wget) report that failure instead
 * of the answer, so the user never learns why. Instead, after the answer the socket's writing
 * side is shut (the client sees the end of the answer) and the rest of the body is read and
 * thrown away, up to `maxBytes` or `maxMs`, whichever comes first; then the socket is closed.
 * Clients whose body fits the bound all see the answer; above it, clients that read while they
 * send (curl) still do; and no request holds its connection longer than the bound.
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

export interface LingerBounds {
  /** Bytes of body read and discarded at most after an early answer. */
  maxBytes: number
  /** ms a connection may linger at most after an early answer. */
  maxMs: number
}

const lingering = new WeakSet<Socket>()

/** Call when answering `req` before its body was read; the answer must say `Connection: close`. */
export function lingerAfterEarlyAnswer (req: IncomingMessage, bounds: LingerBounds): void {
  const socket = req.socket
  if (lingering.has(socket) || socket.destroyed) return
  lingering.add(socket)
  // Whoever was reading the body (the multipart parser) has given up: keep it flowing, counted.
  let seen = 0
  // Until the answer is written, going over the bound only stops reading; then the socket closes.
  let close = () => { req.pause() }
  req.unpipe()
  req.on('data', (chunk: Buffer) => { seen += chunk.length; if (seen > bounds.maxBytes) close() })
  req.resume()
  // Node calls destroySoon() once a `Connection: close` answer is written.
  socket.destroySoon = function lingeringClose (this: Socket) {
    if (this.writable) this.end() // FIN: the answer is complete
    const timer = setTimeout(() => close(), bounds.maxMs)
    timer.unref()
    close = () => { clearTimeout(timer); this.destroy() }
    this.once('close', () => clearTimeout(timer))
    if (req.complete || seen > bounds.maxBytes) close()
    else {
      req.once('end', close)
      req.once('error', close)
    }
  }
}
