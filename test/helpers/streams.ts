import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'

/** Deterministic pseudo-random bytes (cheap, not compressible by accident). */
export function bytes (size: number, seed = 1): Buffer {
  const buf = Buffer.allocUnsafe(size)
  let x = seed >>> 0 || 1
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    buf[i] = x & 0xff
  }
  return buf
}

/** Streams `size` bytes in 64 KiB chunks without holding them all; fails after `failAfter` bytes if set. */
export function byteStream (size: number, opts: { failAfter?: number, seed?: number } = {}): Readable {
  const chunk = bytes(64 * 1024, opts.seed)
  let sent = 0
  return new Readable({
    read () {
      if (opts.failAfter !== undefined && sent >= opts.failAfter) {
        this.destroy(new Error('body failed on purpose'))
        return
      }
      if (sent >= size) { this.push(null); return }
      const n = Math.min(chunk.length, size - sent)
      sent += n
      this.push(n === chunk.length ? chunk : chunk.subarray(0, n))
    }
  })
}

export async function sha256 (stream: AsyncIterable<Uint8Array>): Promise<{ hash: string, size: number }> {
  const h = createHash('sha256')
  let size = 0
  for await (const c of stream) { h.update(c); size += c.length }
  return { hash: h.digest('hex'), size }
}

export const sha256Of = (buf: Uint8Array) => createHash('sha256').update(buf).digest('hex')
