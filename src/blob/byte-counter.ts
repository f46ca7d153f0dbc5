import { Transform } from 'node:stream'

/** A pass-through that counts the bytes flowing through it (`.bytes`). */
export class ByteCounter extends Transform {
  bytes = 0
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void) {
    this.bytes += chunk.length
    done(null, chunk)
  }
}
