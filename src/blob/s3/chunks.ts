/**
 * Chunked uploads on S3. A session opens one S3 multipart upload for the final key. S3's rules
 * (every part but the last ≥ 5 MiB, at most 10,000 parts, part numbers ascending) are ours to
 * keep, whatever chunk size the client picked, so the session settles, once and atomically in
 * the state, on a layout, from the first non-final chunk's size: its Content-Length tells when
 * it is under 5 MiB or over 5 MiB + the multipart's room; otherwise (no Content-Length, or one
 * near 5 MiB) its first 5 MiB are read (the probe, at most 8 at once per instance, so their
 * memory outside the part memory is bounded: a chunk that stalls there cannot take more).
 * Chunks of a settled session are not probed: they stream into the part memory at once:
 *
 * - `parts` (chunks ≥ 5 MiB): chunk i goes straight into the multipart upload as parts
 *   numbered from i·K + 1, K = ⌊10000 / total_chunks⌋ numbers reserved per chunk, so chunks can
 *   arrive in any order and be retried (a retry overwrites the same numbers). UploadPart needs a
 *   known length, so a chunk is cut into pieces of S3_PART_SIZE bytes (parts.ts, in slabs from
 *   the store's pool), a full piece sent once the next holds 5 MiB, so the chunk's final piece
 *   is ≥ 5 MiB too (a shorter tail goes out with the piece before it).
 *   A chunk may hold at most K·S3_PART_SIZE + 5 MiB bytes (413 beyond). Completion is one
 *   CompleteMultipartUpload: no byte is copied.
 * - `objects` (chunks < 5 MiB, e.g. the common 1 MiB): such a chunk cannot be a part, so each
 *   chunk is streamed to its own temporary object `{key}.chunk-{i}-{nonce}`. Completion streams
 *   them in order into the final object through the part writer (one pass through the service,
 *   memory bounded by the slab pool, admitted at its gate like an upload, hashed on the way),
 *   then deletes them. S3 never sees a
 *   small non-final part.
 *
 * The first non-final chunk decides. A non-final chunk < 5 MiB in a `parts` session is refused
 * (400 DROPCODE_CHUNK_TOO_SMALL): clients use one chunk size. The last chunk never decides
 * (it may be any size); if it arrives before the layout is settled it is kept as an object and,
 * in a `parts` session, sent as the final part at completion. A one-chunk session is `parts`.
 *
 * Cleanup: completion deletes every `{key}.chunk-*` object, recorded or not (a chunk stored by a
 * request that died before recording it is not); the sweeper's purge of the key aborts the
 * multipart upload and deletes every `{key}.chunk-*` object, so an abandoned session leaves nothing.
 */
import { randomBytes } from 'node:crypto'
import { pipeline, Readable } from 'node:stream'
import { DropcodeError } from '../../core/errors.js'
import { Sha256Meter } from '../../core/streams.js'
import type { ChunkInput, ChunkReceipt } from '../blob-store.js'
import type { PartRef, S3Api } from './api.js'
import { streamParts, ticketOf } from './parts.js'

const MiB = 1024 * 1024
export const MIN_PART = 5 * MiB
export const MAX_PARTS = 10_000

type S3Receipt = ChunkReceipt & { parts?: PartRef[], object?: string }

/**
 * After a completion: deletes the `{key}.chunk-*` objects, the `known` ones (named by records)
 * first, then whatever the listing finds. Best effort: the file is complete; a leftover costs
 * storage, not correctness.
 */
export async function deleteChunkObjects (s3: S3Api, key: string, known: string[]): Promise<void> {
  for (const object of known) await s3.delete(object).catch(() => {})
  // Also chunk objects that no record names: a request that stored its chunk and died
  // before recording it (kill -9 of its instance) left one, and nothing else would ever
  // delete it once the session is a file (deleting a file removes its key only).
  try {
    for await (const object of s3.list(`${key}.chunk-`)) await s3.delete(object).catch(() => {})
  } catch { /* best effort, see above */ }
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

/**
 * Probes under way at once per store: each holds up to 5 MiB outside the part memory, so their
 * memory is bounded too (8 × 5 MiB). A probe that finds none free waits, unread (TCP backpressure).
 */
const PROBES = 8

/**
 * Bytes of a chunk request that are not the chunk: boundaries, part headers, text fields (the
 * multipart limits in app.ts allow less; plugins/early-answers.ts allows as much). A request
 * declaring 5 MiB + this much or more holds a chunk of 5 MiB or more unless it is malformed.
 */
const MULTIPART_SLACK = 256 * 1024

/**
 * Streams `objects` in order through the service into the object `key` (`size` bytes in all),
 * hashing them: through the gate like any upload (parts.ts), before the first object is read.
 * @returns their SHA-256
 */
export async function streamObjects (s3: S3Api, key: string, objects: string[], size: number): Promise<string> {
  async function * concatenated () {
    for (const object of objects) yield * (await s3.get(object)).body
  }
  const ticket = await s3.pool.admit(size)
  try {
    const meter = new Sha256Meter()
    pipeline(Readable.from(concatenated()), meter, () => {})
    await s3.putStream(key, meter, size, ticket)
    return meter.hex()
  } finally {
    ticket.release()
  }
}

/** A counting semaphore, first come first served. */
function semaphore (n: number) {
  let free = n
  const waiting: Array<() => void> = []
  const release = () => { const next = waiting.shift(); if (next !== undefined) next(); else free++ }
  return {
    async acquire (): Promise<() => void> {
      if (free > 0) free--
      else await new Promise<void>(resolve => waiting.push(resolve))
      let done = false
      return () => { if (!done) { done = true; release() } }
    }
  }
}

export function createS3Chunks (s3: S3Api) {
  const probes = semaphore(PROBES)
  async function putParts (key: string, uploadId: string, chunk: ChunkInput, body: AsyncIterable<Buffer>): Promise<S3Receipt> {
    const slots = Math.floor(MAX_PARTS / chunk.total)
    const first = chunk.index * slots + 1
    const parts: PartRef[] = []
    const { size } = await streamParts(body, {
      pool: s3.pool,
      concurrency: s3.queueSize,
      holdBack: MIN_PART,
      maxBytes: slots * s3.pool.partSize + MIN_PART,
      maxLength: chunk.maxLength,
      ticket: ticketOf(chunk.ticket),
      tooLarge: () => new DropcodeError('DROPCODE_CHUNK_TOO_LARGE', `With total_chunks=${chunk.total}, a chunk may hold at most ${slots * s3.pool.partSize + MIN_PART} bytes.`),
      sendPart: async (i, data, length, again) => {
        parts.push({ n: first + i, etag: await s3.uploadPart(key, uploadId, first + i, data, length, again), size: length })
      }
    })
    return { size, parts: parts.sort((a, b) => a.n - b.n) }
  }

  return {
    begin: (key: string) => s3.createMultipart(key),

    async put (key: string, uploadId: string, chunk: ChunkInput): Promise<S3Receipt> {
      const source = chunk.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>
      const isLast = chunk.index === chunk.total - 1
      const settled = await chunk.settleLayout(undefined)
      const counter = { size: 0 }
      let layout: string | undefined
      let body: AsyncIterable<Buffer>
      /** Whether the chunk holds 5 MiB or more; undefined: not known before it is read. */
      let big: boolean | undefined
      if (chunk.maxLength !== undefined && chunk.maxLength < MIN_PART) big = false
      else if (chunk.maxLength !== undefined && chunk.maxLength >= MIN_PART + MULTIPART_SLACK) big = true
      if (settled !== undefined || big !== undefined || isLast) {
        // Known without reading: the session's layout, or the request's Content-Length.
        layout = settled ?? (isLast ? await chunk.settleLayout(chunk.total === 1 ? 'parts' : undefined) : await chunk.settleLayout(big! ? 'parts' : 'objects'))
        if (layout === 'parts' && big === false && !isLast) throw new DropcodeError('DROPCODE_CHUNK_TOO_SMALL')
        body = joined([], source, counter)
      } else {
        // The probe: the first 5 MiB, read into memory of a bounded budget of its own.
        const release = await probes.acquire()
        try {
          const head: Buffer[] = []
          let headBytes = 0
          let ended = false
          while (headBytes < MIN_PART) {
            const { value, done } = await source.next()
            if (done === true) { ended = true; break }
            head.push(value)
            headBytes += value.length
          }
          big = !ended || headBytes >= MIN_PART
          layout = await chunk.settleLayout(big ? 'parts' : 'objects')
          if (layout === 'parts' && !big) throw new DropcodeError('DROPCODE_CHUNK_TOO_SMALL')
          body = joined(head, source, counter)
        } finally {
          release()
        }
      }
      if (layout === 'parts') {
        const receipt = await putParts(key, uploadId, chunk, body)
        // Read whole only now (its Content-Length did not tell): a non-final part under 5 MiB
        // would fail the completion. Its part number is left to be overwritten or dropped.
        if (!isLast && receipt.size < MIN_PART) throw new DropcodeError('DROPCODE_CHUNK_TOO_SMALL')
        return receipt
      }
      const object = `${key}.chunk-${chunk.index}-${randomBytes(6).toString('hex')}`
      await s3.putStream(object, Readable.from(body), chunk.maxLength, ticketOf(chunk.ticket))
      return { size: counter.size, object }
    },

    async discard (receipt: S3Receipt): Promise<void> {
      if (receipt.object !== undefined) await s3.delete(receipt.object)
    },

    async complete (key: string, uploadId: string, receipts: S3Receipt[]): Promise<{ size: number, sha256?: string }> {
      const size = receipts.reduce((n, r) => n + r.size, 0)
      const lastIndex = receipts.length - 1
      const objects = receipts.filter(r => r.object !== undefined).map(r => r.object!)
      const viaObjects = receipts.some((r, i) => i < lastIndex && r.object !== undefined)
      let sha256: string | undefined
      if (viaObjects || size === 0) {
        if (size === 0) {
          await s3.putEmpty(key)
        } else {
          sha256 = await streamObjects(s3, key, objects, size)
        }
        await s3.abortMultipart(key, uploadId).catch(() => {})
      } else {
        const parts = receipts.flatMap(r => r.parts ?? [])
        const tail = receipts[lastIndex]!
        if (tail.object !== undefined) {
          // The last chunk arrived before the layout was settled: send it as the final part.
          const n = lastIndex * Math.floor(MAX_PARTS / receipts.length) + 1
          const { body } = await s3.get(tail.object)
          parts.push({ n, etag: await s3.uploadPart(key, uploadId, n, body, tail.size), size: tail.size })
        }
        await s3.completeMultipart(key, uploadId, parts)
      }
      await deleteChunkObjects(s3, key, objects)
      return sha256 === undefined ? { size } : { size, sha256 }
    }
  }
}
