/**
 * Chunked uploads on S3. A session opens one S3 multipart upload for the final key. S3's rules
 * (every part but the last ≥ 5 MiB, at most 10,000 parts, part numbers ascending) are ours to
 * keep, whatever chunk size the client picked, so each chunk first has its first 5 MiB read
 * (the probe) and the session settles, once and atomically in the state store, on a layout:
 *
 * - `parts` (chunks ≥ 5 MiB): chunk i goes straight into the multipart upload as parts
 *   numbered from i·K + 1, K = ⌊10000 / total_chunks⌋ numbers reserved per chunk, so chunks can
 *   arrive in any order and be retried (a retry overwrites the same numbers). UploadPart needs a
 *   known length, so a chunk is cut into pieces of S3_PART_SIZE bytes, each sent when
 *   S3_PART_SIZE + 5 MiB bytes are buffered; the held-back 5 MiB makes the chunk's final piece
 *   ≥ 5 MiB too. Memory per chunk request: ≤ S3_PART_SIZE + 5 MiB (+ one copy while sending).
 *   A chunk may hold at most K·S3_PART_SIZE + 5 MiB bytes (413 beyond). Completion is one
 *   CompleteMultipartUpload: no byte is copied.
 * - `objects` (chunks < 5 MiB, e.g. the common 1 MiB): such a chunk cannot be a part, so each
 *   chunk is streamed to its own temporary object `{key}.chunk-{i}-{nonce}`. Completion streams
 *   them in order into the final object through lib-storage (one pass through the service,
 *   memory bounded by the part buffers), then deletes them. S3 never sees a small non-final part.
 *
 * The first non-final chunk decides. A non-final chunk < 5 MiB in a `parts` session is refused
 * (400 DROPCODE_CHUNK_TOO_SMALL): clients use one chunk size. The last chunk never decides
 * (it may be any size); if it arrives before the layout is settled it is kept as an object and,
 * in a `parts` session, sent as the final part at completion. A one-chunk session is `parts`.
 *
 * Cleanup: the sweeper's purge of the key aborts the multipart upload and deletes every
 * `{key}.chunk-*` object, so an abandoned session leaves nothing.
 */
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateMultipartUploadCommand,
  DeleteObjectCommand, GetObjectCommand, PutObjectCommand, UploadPartCommand, type S3Client
} from '@aws-sdk/client-s3'
import { DropcodeError } from '../errors.js'
import type { ChunkInput, ChunkReceipt } from './blob-store.js'

const MiB = 1024 * 1024
export const MIN_PART = 5 * MiB
const MAX_PARTS = 10_000

interface PartRef { n: number, etag: string, size: number }
type S3Receipt = ChunkReceipt & { parts?: PartRef[], object?: string }

export interface S3ChunksOptions {
  client: S3Client
  bucket: string
  partSize: number
  /** Streams a body of unknown length into an object (lib-storage); rejects with the body's error if it failed. */
  uploadStream (objectKey: string, body: Readable): Promise<void>
  /** Maps S3 failures to the catalogue. */
  storageError (err: unknown): Error
}

/** Yields `head` then whatever is left in `rest`, counting bytes into `counter.size`. */
async function * joined (head: Buffer[], rest: AsyncIterator<Buffer>, counter: { size: number }) {
  for (const b of head) { counter.size += b.length; yield b }
  while (true) {
    const { value, done } = await rest.next()
    if (done === true) return
    counter.size += value.length
    yield value
  }
}

export function createS3Chunks (opts: S3ChunksOptions) {
  const { client, bucket, partSize } = opts
  const send = async <T>(op: () => Promise<T>): Promise<T> => {
    try {
      return await op()
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchUpload') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND', undefined, undefined, { cause: err })
      throw opts.storageError(err)
    }
  }

  async function putParts (Key: string, UploadId: string, chunk: ChunkInput, body: AsyncIterable<Buffer>): Promise<S3Receipt> {
    const slots = Math.floor(MAX_PARTS / chunk.total)
    const first = chunk.index * slots + 1
    const parts: PartRef[] = []
    let held: Buffer[] = []
    let heldBytes = 0
    let size = 0
    const sendPiece = async (bytes: number) => {
      const all = Buffer.concat(held, heldBytes)
      const piece = all.subarray(0, bytes)
      held = bytes < all.length ? [all.subarray(bytes)] : []
      heldBytes = all.length - bytes
      const PartNumber = first + parts.length
      const res = await send(() => client.send(new UploadPartCommand({ Bucket: bucket, Key, UploadId, PartNumber, Body: piece, ContentLength: piece.length })))
      parts.push({ n: PartNumber, etag: res.ETag!, size: piece.length })
    }
    for await (const data of body) {
      held.push(data)
      heldBytes += data.length
      size += data.length
      // sendPiece lowers heldBytes and adds to parts.
      while (heldBytes >= partSize + MIN_PART && parts.length < slots - 1) await sendPiece(partSize) // eslint-disable-line no-unmodified-loop-condition
      if (heldBytes > partSize + MIN_PART) {
        throw new DropcodeError('DROPCODE_CHUNK_TOO_LARGE', `With total_chunks=${chunk.total}, a chunk may hold at most ${slots * partSize + MIN_PART} bytes.`)
      }
    }
    if (heldBytes > 0) await sendPiece(heldBytes)
    return { size, parts }
  }

  return {
    async begin (Key: string): Promise<string> {
      const res = await send(() => client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key, ContentType: 'application/octet-stream' })))
      return res.UploadId!
    },

    async put (Key: string, UploadId: string, chunk: ChunkInput): Promise<S3Receipt> {
      const source = chunk.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>
      const head: Buffer[] = []
      let headBytes = 0
      let ended = false
      while (headBytes < MIN_PART) {
        const { value, done } = await source.next()
        if (done === true) { ended = true; break }
        head.push(value)
        headBytes += value.length
      }
      const big = !ended || headBytes >= MIN_PART
      const isLast = chunk.index === chunk.total - 1
      const layout = isLast
        ? await chunk.settleLayout(chunk.total === 1 ? 'parts' : undefined)
        : await chunk.settleLayout(big ? 'parts' : 'objects')
      if (layout === 'parts' && !big && !isLast) throw new DropcodeError('DROPCODE_CHUNK_TOO_SMALL')
      const counter = { size: 0 }
      const body = joined(head, source, counter)
      if (layout === 'parts') return await putParts(Key, UploadId, chunk, body)
      const object = `${Key}.chunk-${chunk.index}-${randomBytes(6).toString('hex')}`
      await opts.uploadStream(object, Readable.from(body))
      return { size: counter.size, object }
    },

    async discard (receipt: S3Receipt): Promise<void> {
      if (receipt.object !== undefined) await send(() => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: receipt.object })))
    },

    async complete (Key: string, UploadId: string, receipts: S3Receipt[]): Promise<{ size: number }> {
      const size = receipts.reduce((n, r) => n + r.size, 0)
      const lastIndex = receipts.length - 1
      const objects = receipts.filter(r => r.object !== undefined).map(r => r.object!)
      const viaObjects = receipts.some((r, i) => i < lastIndex && r.object !== undefined)
      if (viaObjects || size === 0) {
        if (size === 0) {
          await send(() => client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: new Uint8Array(0), ContentLength: 0 })))
        } else {
          async function * concatenated () {
            for (const object of objects) {
              const res = await send(() => client.send(new GetObjectCommand({ Bucket: bucket, Key: object })))
              yield * (res.Body as Readable)
            }
          }
          await opts.uploadStream(Key, Readable.from(concatenated()))
        }
        await send(() => client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key, UploadId }))).catch(() => {})
      } else {
        const parts = receipts.flatMap(r => r.parts ?? [])
        const tail = receipts[lastIndex]!
        if (tail.object !== undefined) {
          // The last chunk arrived before the layout was settled: send it as the final part.
          const PartNumber = lastIndex * Math.floor(MAX_PARTS / receipts.length) + 1
          const res = await send(() => client.send(new GetObjectCommand({ Bucket: bucket, Key: tail.object })))
          const part = await send(() => client.send(new UploadPartCommand({ Bucket: bucket, Key, UploadId, PartNumber, Body: res.Body as Readable, ContentLength: tail.size })))
          parts.push({ n: PartNumber, etag: part.ETag!, size: tail.size })
        }
        await send(() => client.send(new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key,
          UploadId,
          MultipartUpload: { Parts: parts.sort((a, b) => a.n - b.n).map(p => ({ PartNumber: p.n, ETag: p.etag })) }
        })))
      }
      for (const object of objects) {
        await send(() => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: object }))).catch(() => {})
      }
      return { size }
    }
  }
}
