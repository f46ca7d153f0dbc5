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
 * It wraps this one response's `write` (what `pipe` calls), before the body is sent. Bytes still
 * in our buffers when the connection closes never get a successful callback, so they do not
 * count: a download cut short stays cut.
 */
import type { ServerResponse } from 'node:http'

type WriteCallback = (err?: Error | null) => void
type Write = (chunk: unknown, encoding?: BufferEncoding | WriteCallback, callback?: WriteCallback) => boolean

/** Counts `res`'s body bytes that went out; read it once the response has closed. */
export function countSentBytes (res: ServerResponse): () => number {
  let sent = 0
  const write = res.write.bind(res) as Write
  const counted: Write = (chunk, encoding, callback) => {
    const cb = typeof encoding === 'function' ? encoding : callback
    const enc = typeof encoding === 'function' ? undefined : encoding
    const size = typeof chunk === 'string' ? Buffer.byteLength(chunk, enc) : (chunk as Uint8Array).byteLength
    return write(chunk, enc, err => {
      if (err == null) sent += size
      cb?.(err)
    })
  }
  res.write = counted as ServerResponse['write']
  return () => sent
}
