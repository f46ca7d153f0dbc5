/**
 * How many body bytes of a request arrived: what Node's HTTP parser handed to the request
 * stream, after any chunked transfer-encoding is undone, whether or not a handler read them.
 * `Content-Length` is what the client promised, not what it sent: a request cut mid-body, or a
 * chunked one (no Content-Length at all), is logged with the bytes that really came.
 *
 * It wraps this one request's `push` (what the parser calls with each piece of body). The first
 * piece can arrive in the same read as the headers and is pushed before any hook runs: what is
 * buffered then counts too (nothing reads a body before the onRequest hooks are done).
 */
import type { IncomingMessage } from 'node:http'

const none = () => 0

/** Counts `req`'s body bytes from now on, plus those already buffered. */
export function countReceivedBytes (req: IncomingMessage): () => number {
  // Without Content-Length or Transfer-Encoding a request has no body (RFC 9112, 6.3): a GET
  // or HEAD, nothing to wrap.
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return none
  let received = req.readableLength
  const push = req.push.bind(req)
  req.push = (chunk: unknown, encoding?: BufferEncoding) => {
    if (typeof chunk === 'string') received += Buffer.byteLength(chunk, encoding)
    else if (chunk instanceof Uint8Array) received += chunk.byteLength
    return push(chunk, encoding)
  }
  return () => received
}
