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

type TooLargeCode = 'DROPCODE_FILE_TOO_LARGE' | 'DROPCODE_CHUNK_TOO_LARGE'
const tooLarge = (code: TooLargeCode, max: number) =>
  new DropcodeError(code, `${code === 'DROPCODE_FILE_TOO_LARGE' ? 'The file' : 'The chunk'} is larger than the limit of ${max} bytes.`)

/**
 * A pass-through that counts and hashes (SHA-256) what flows through it; with `limit`, it also
 * fails (413) as soon as more than `limit.max` bytes pass. One stage, not a size limit and a
 * meter: every stage of a request body's pipeline holds a chunk or two (up to 64 KiB each)
 * while the upload waits for storage, and thousands of uploads may wait at once.
 */
export class Sha256Meter extends Transform {
  bytes = 0
  private readonly hash: Hash = createHash('sha256')
  /** `also`: called with every buffer that passes (after the limit's check), e.g. a second hash. */
  /** `limit.error`: the refusal beyond `max` (default: 413 with `code`). */
  constructor (private readonly limit?: { max: number, code?: TooLargeCode, error?: () => Error }, private readonly also?: (data: Buffer) => void) { super() }
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.bytes += chunk.length
    if (this.limit !== undefined && this.bytes > this.limit.max) { done(this.limit.error?.() ?? tooLarge(this.limit.code ?? 'DROPCODE_FILE_TOO_LARGE', this.limit.max)); return }
    this.hash.update(chunk)
    this.also?.(chunk)
    done(null, chunk)
  }

  /** The digest, hex; call once, after the stream ended. */
  hex (): string {
    return this.hash.digest('hex')
  }
}
