/**
 * The file lifecycle, independent of HTTP: receive bytes into a new object, publish them under
 * a fresh code, serve downloads against the limit, delete. Takes its stores as arguments; the
 * routes only parse and map results.
 *
 * Ordering rules that keep storage and state consistent:
 * - An object key enters the cleanup index (deadline: now + UPLOAD_TIMEOUT) *before* any byte
 *   is written, so a crash mid-upload leaves something the sweeper finds.
 * - The record is created after the object is complete; if that fails the object is deleted.
 * - A download is claimed before the object is opened; if the object cannot be opened for a
 *   transient reason the claim is refunded, so a storage fault never eats a download.
 */
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { BlobNotFoundError, type BlobStore } from '../blob/index.js'
import { DropcodeError } from '../errors.js'
import { cleanFilename, contentTypeFor } from '../http/filename.js'
import { isCode, newBlobKey, newCode } from '../ids.js'
import { ByteCounter } from '../blob/byte-counter.js'
import type { Metrics } from '../metrics.js'
import type { InFlight } from './in-flight.js'
import type { FileRecord, StateStore, Unavailable } from '../state/index.js'

const HOUR = 3_600_000
const CODE_ATTEMPTS = 8

export interface StoredBlob {
  key: string
  size: number
  filename: string
}

export interface Download {
  file: FileRecord
  body: Readable
  /**
   * Call once the response is over; `complete` when every byte went out. Deletes the object
   * after the last permitted download (sent or not: a claimed download counts).
   */
  finish (complete: boolean): void
}

export interface FileServiceOptions {
  blobs: BlobStore
  state: StateStore
  log: FastifyBaseLogger
  metrics: Metrics
  /** Uploads and object deletions are tracked so a shutdown waits for their cleanup. */
  inFlight: InFlight
  /** Epoch ms. */
  now: () => number
  /** Bytes. */
  maxFileSize: number
  /** ms an object outlives its record's expiry. */
  graceMs: number
  /** ms after which an unfinished upload counts as abandoned. */
  uploadTimeoutMs: number
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

export class FileNotFound extends DropcodeError {
  constructor (readonly reason: Unavailable) { super('DROPCODE_FILE_NOT_FOUND') }
}

export type FileService = ReturnType<typeof createFileService>

export function createFileService (opts: FileServiceOptions) {
  const { blobs, state, log, metrics, now } = opts
  const notFound = (reason: Unavailable) => {
    metrics.downloadRefused(reason)
    return new FileNotFound(reason)
  }

  /** Deletes an object and its index entry; on failure the sweeper retries at its deadline. */
  function dropBlob (key: string): Promise<void> {
    return opts.inFlight.track((async () => {
      try {
        await blobs.delete(key)
        await state.forgetBlob(key)
      } catch (err) {
        log.warn({ err, blobKey: key }, 'could not delete object now; the sweeper will retry')
      }
    })())
  }

  async function receive (body: Readable, rawFilename: string | undefined): Promise<StoredBlob> {
    const key = newBlobKey()
    try {
      await state.scheduleBlobCleanup(key, now() + opts.uploadTimeoutMs)
    } catch (err) {
      body.resume() // let the parser finish reading the request
      throw err
    }
    const limited = new SizeLimit(opts.maxFileSize)
    pipeline(body, limited, () => {})
    try {
      const { size } = await blobs.put(key, limited, { contentType: 'application/octet-stream' })
      return { key, size, filename: cleanFilename(rawFilename) }
    } catch (err) {
      body.destroy()
      await dropBlob(key)
      throw err
    }
  }

  return {
    /** Streams an upload body into a new object, enforcing MAX_FILE_SIZE. */
    receive (body: Readable, rawFilename: string | undefined): Promise<StoredBlob> {
      return opts.inFlight.track(receive(body, rawFilename))
    },

    discard: (blob: StoredBlob) => dropBlob(blob.key),

    /** Registers a stored object under a fresh code; deletes the object if that fails. */
    async publish (blob: StoredBlob, settings: { maxDownloads: number, expiryHours: number }, kind: 'single' | 'chunked' = 'single'): Promise<FileRecord> {
      const createdAt = now()
      const expiresAt = createdAt + settings.expiryHours * HOUR
      try {
        for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
          const file: FileRecord = {
            code: newCode(),
            blobKey: blob.key,
            filename: blob.filename,
            contentType: contentTypeFor(blob.filename),
            size: blob.size,
            maxDownloads: settings.maxDownloads,
            downloads: 0,
            createdAt,
            expiresAt
          }
          if (await state.createFile(file, expiresAt + opts.graceMs)) {
            metrics.uploaded(kind, file.size)
            return file
          }
          log.warn({ attempt }, 'download code collision; drawing another')
        }
        throw new DropcodeError('DROPCODE_INTERNAL', undefined, undefined, { cause: new Error('no free download code after several draws') })
      } catch (err) {
        await dropBlob(blob.key)
        throw err
      }
    },

    /** A live file, without claiming a download (HEAD). */
    async lookup (code: string): Promise<FileRecord> {
      if (!isCode(code)) throw notFound('unknown') // before any store sees it
      const found = await state.lookupFile(code, now())
      if (!found.ok) throw notFound(found.reason)
      return found.file
    },

    /** Claims one download and opens the object. */
    async startDownload (code: string): Promise<Download> {
      if (!isCode(code)) throw notFound('unknown') // before any store sees it
      const claim = await state.claimDownload(code, now())
      if (!claim.ok) throw notFound(claim.reason)
      const { file, last } = claim
      let body: Readable
      try {
        ({ body } = await blobs.get(file.blobKey))
      } catch (err) {
        if (err instanceof BlobNotFoundError) {
          log.error({ blobKey: file.blobKey }, 'file record points at a missing object')
          throw notFound('unknown')
        }
        await state.refundDownload(code).catch(e => log.error({ err: e }, 'could not refund a download claim'))
        throw err
      }
      const counter = new ByteCounter()
      pipeline(body, counter, () => {})
      let finished = false
      return {
        file,
        body: counter,
        finish (complete) {
          if (finished) return
          finished = true
          counter.destroy() // stops reading storage if the client went away
          metrics.downloadEnded(counter.bytes, complete)
          if (last) dropBlob(file.blobKey).catch(() => {})
        }
      }
    },

    /** Deletes a live file: record first (atomically), then its object. */
    async remove (code: string): Promise<void> {
      if (!isCode(code)) throw new FileNotFound('unknown') // before any store sees it
      const removed = await state.deleteFile(code, now())
      if (!removed.ok) throw new FileNotFound(removed.reason) // not a download refusal
      await dropBlob(removed.file.blobKey)
    }
  }
}
