/** Stream helpers for bytes on their way to or from storage. */
import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { DropcodeError } from './errors.js'

/** A pass-through that counts the bytes flowing through it (`.bytes`). */
export class ByteCounter extends Transform {
  bytes = 0
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.bytes += chunk.length
    done(null, chunk)
  }
}

/** A pass-through that counts and hashes (SHA-256) what flows through it. */
export class Sha256Meter extends Transform {
  bytes = 0
  private readonly hash: Hash = createHash('sha256')
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.bytes += chunk.length
    this.hash.update(chunk)
    done(null, chunk)
  }

  /** The digest, hex; call once, after the stream ended. */
  hex (): string {
    return this.hash.digest('hex')
  }
}

/** Fails the stream (413) as soon as more than `max` bytes pass. */
export class SizeLimit extends Transform {
  private seen = 0
  constructor (private readonly max: number, private readonly code: 'DROPCODE_FILE_TOO_LARGE' | 'DROPCODE_CHUNK_TOO_LARGE' = 'DROPCODE_FILE_TOO_LARGE') { super() }
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.seen += chunk.length
    if (this.seen > this.max) done(new DropcodeError(this.code, `${this.code === 'DROPCODE_FILE_TOO_LARGE' ? 'The file' : 'The chunk'} is larger than the limit of ${this.max} bytes.`))
    else done(null, chunk)
  }
}
