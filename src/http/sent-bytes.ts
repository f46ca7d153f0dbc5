/**
 * How many body bytes of a response went out: written to the socket, each write's callback
 * called without an error (the bytes are in the kernel's send buffer or already with the
 * client; the same point at which `finish` would have fired).
 *
 * Why not `writableFinished`: a client that has its `Content-Length` bytes may close the
 * connection before the server has ended the response (curl and wget do, as soon as the last
 * byte arrives; the end of the body still has to come from storage). The response then closes
 * unfinished although every byte was delivered. A download is whole when every byte was
 * written, whoever closes first.
 *
 * It wraps this one response's `write` (what `pipe` calls) and `end` (a body sent whole, as
 * fastify sends JSON and pages), before the body is sent. Bytes still in our buffers when the
 * connection closes never get a successful callback, so they do not count: a download cut short
 * stays cut. A body given to `end` counts once the response has finished. A response that has
 * no body (HEAD, 204, 304: Node drops what is written) counts 0.
 */
import type { ServerResponse } from 'node:http'

type WriteCallback = (err?: Error | null) => void
type Write = (chunk: unknown, encoding?: BufferEncoding | WriteCallback, callback?: WriteCallback) => boolean
type End = (...args: unknown[]) => ServerResponse

const byteLength = (chunk: unknown, encoding?: BufferEncoding) =>
  typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk instanceof Uint8Array ? chunk.byteLength : 0

/** Node sends no body for these, whatever is written. */
const bodyless = (res: ServerResponse) => res.req?.method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304

/** Counts `res`'s body bytes that went out; read it once the response has closed. */
export function countSentBytes (res: ServerResponse): () => number {
  let sent = 0
  let atEnd = 0
  const write = res.write.bind(res) as Write
  const counted: Write = (chunk, encoding, callback) => {
    const cb = typeof encoding === 'function' ? encoding : callback
    const enc = typeof encoding === 'function' ? undefined : encoding
    const size = byteLength(chunk, enc)
    return write(chunk, enc, err => {
      if (err == null) sent += size
      cb?.(err)
    })
  }
  res.write = counted as ServerResponse['write']
  const end = res.end.bind(res) as End
  const ended: End = (...args) => {
    if (typeof args[0] !== 'function') atEnd = byteLength(args[0], typeof args[1] === 'string' ? args[1] as BufferEncoding : undefined)
    return end(...args)
  }
  res.end = ended as ServerResponse['end']
  return () => bodyless(res) ? 0 : sent + (res.writableFinished ? atEnd : 0)
}
