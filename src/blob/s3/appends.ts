/**
 * Appendable (tus) uploads on S3: the bytes arrive in order, in appends of any size (a PATCH
 * each, possibly cut short), and any instance may do the next append.
 *
 * Key layout: one S3 multipart upload of the final key `{key}` (the handle is its UploadId, as
 * for chunked sessions), plus at most one live *tail* object per append,
 * `{key}.chunk-tail-{nonce}`: the upload's bytes not yet in any part.
 *
 * Parts: S3 wants every part but the last ≥ 5 MiB, and an append may bring 1 byte. So each
 * append streams the previous tail (GET) and then its own body through the part writer
 * (parts.ts `streamParts`, `holdBack` 5 MiB): every piece it sends is ≥ 5 MiB and becomes a
 * part; part numbers run on across appends (1, 2, 3, …; the receipt's `nextPart` is where the
 * next append starts) up to 9,999: number 10,000 is the final tail's, so the tail is always the
 * last part whatever else the upload holds (beyond: 413, DROPCODE_FILE_TOO_LARGE). When what an
 * append streams fits in one piece and is under 5 MiB, it is stored as the new tail object
 * instead. So small appends accumulate in the tail (copied forward, at most 5 MiB per append)
 * until it reaches a part. An append that brings no byte (an empty body, or one that failed at
 * once) stores nothing and carries the previous tail and `nextPart` forward in its receipt.
 *
 * Receipt: `{ size, append: true, parts, nextPart, tail? }`: `size` the bytes this append
 * added (the body's, not the previous tail's), `parts` the parts it uploaded, `tail` the bytes
 * after them as of this append. Everything the next append needs is in S3 and the receipt.
 *
 * What is atomic, and why a receipt stays valid: an append writes only part numbers from
 * `previous.nextPart` on and a tail object of a new name; it never deletes anything. So while
 * the service has not recorded it (the append failed, the record failed, or a checksum
 * mismatch made the service discard it), `previous` still names exactly its own parts and tail,
 * and the next attempt uploads the same part numbers again (S3 keeps the newest upload of a
 * number). `discard` of an unrecorded receipt deletes the tail it wrote (a 0-byte receipt's
 * tail is its previous's: kept). Appends of one upload must not overlap (the service runs one
 * at a time): a late write by a superseded attempt would replace a recorded part.
 *
 * Completion: the last receipt's tail uploaded as part 10,000, then one CompleteMultipartUpload
 * of the recorded parts; no byte passes through the service but the tail's, so no SHA-256 is
 * reported. An upload of 0 bytes is an empty object (the multipart upload is aborted).
 * Stray parts: an unrecorded attempt may have uploaded more parts than the recorded appends
 * replaced. AWS completes with the listed parts only, but S3-compatible servers need not (Ceph
 * RGW 16 answers InvalidPart unless every uploaded part is listed), and no S3 call removes one
 * part. So completion lists the upload's parts (ListParts) and, if strays are there, completes
 * with all of them (recorded parts, strays, tail: every stray is a ≥ 5 MiB piece, so the order
 * is valid), then rewrites the object from its recorded byte ranges (UploadPartCopy into a
 * second multipart upload of the key, inside S3). Only then does a completion copy bytes.
 *
 * Cleanup: superseded tails are left in place by the appends (deleting them would break
 * `previous`) and removed at completion by the `{key}.chunk-` listing (chunks.ts
 * `deleteChunkObjects`); purge (store.ts) deletes every `{key}.chunk-*` object and aborts the
 * multipart upload, so a terminated or expired upload leaves nothing.
 *
 * Memory: the body and the tail go through the store's slab pool like any upload (admitted at
 * its gate by the service's ticket), never a whole append; outside it, one buffer of the body
 * (the first, read to tell an empty append from a real one).
 *
 * Permissions: those of chunked sessions (store.ts), plus s3:ListMultipartUploadParts.
 */
import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import type { ByteRange } from '../../core/byte-range.js'
import { DropcodeError } from '../../core/errors.js'
import { AppendBody } from '../append-body.js'
import { type AppendInput, BlobNotFoundError, type ChunkReceipt } from '../blob-store.js'
import { type PartRef, s3Error, type S3Api } from './api.js'
import { deleteChunkObjects, MAX_PARTS, MIN_PART } from './chunks.js'
import { streamParts, ticketOf } from './parts.js'

/** The final tail's part number: above every append's, so it is always the last part. */
const FINAL_PART = MAX_PARTS

/** Bytes of the copy ranges at most (S3's limit for UploadPartCopy). */
const MAX_COPY = 5 * 1024 ** 3

/** Bytes of the upload after its last part, in their own object. */
interface Tail { object: string, size: number }

export type AppendReceipt = ChunkReceipt & { append: true, parts: PartRef[], nextPart: number, tail?: Tail }

export const isAppendReceipt = (r: ChunkReceipt): r is AppendReceipt => r.append === true

/** Our own tail missing means the upload was purged meanwhile (terminated or expired). */
const gone = (err: unknown) => err instanceof BlobNotFoundError ? new DropcodeError('DROPCODE_SESSION_NOT_FOUND', undefined, undefined, { cause: err }) : s3Error(err)

/** The tail object's bytes, checked to be exactly `size` of them (anything else would shift the upload). */
async function * tailBytes (body: Readable, size: number): AsyncGenerator<Buffer> {
  let seen = 0
  for await (const chunk of body) {
    seen += (chunk as Buffer).length
    yield chunk as Buffer
  }
  if (seen !== size) throw new Error(`tail object held ${seen} bytes, its receipt says ${size}`)
}

export function createS3Appends (s3: S3Api) {
  /**
   * Completes an upload that holds parts no receipt names (see the top): with every part, then
   * keeps the recorded bytes only, the parts before the strays and the tail after them, copied
   * inside S3 into a second multipart upload of the key, in ranges of 5 MiB to 5 GiB but the last.
   */
  async function completeAround (key: string, uploadId: string, parts: PartRef[], strays: PartRef[], tail: Tail | undefined): Promise<void> {
    await s3.completeMultipart(key, uploadId, [...parts, ...strays])
    const before = parts.filter(p => p.n !== FINAL_PART).reduce((n, p) => n + p.size, 0)
    const skipped = strays.reduce((n, p) => n + p.size, 0)
    const ranges: ByteRange[] = []
    const pieces = Math.ceil(before / MAX_COPY)
    for (let i = 0, at = 0; i < pieces; i++) {
      const end = Math.min(before, at + Math.ceil(before / pieces))
      ranges.push({ start: at, end: end - 1 })
      at = end
    }
    if (tail !== undefined) ranges.push({ start: before + skipped, end: before + skipped + tail.size - 1 })
    const copyId = await s3.createMultipart(key)
    try {
      const copied: PartRef[] = []
      for (const [i, range] of ranges.entries()) {
        copied.push({ n: i + 1, etag: await s3.uploadPartCopy(key, copyId, i + 1, key, range), size: range.end - range.start + 1 })
      }
      await s3.completeMultipart(key, copyId, copied)
    } catch (err) {
      await s3.abortMultipart(key, copyId).catch(() => {})
      throw err
    }
  }

  return {
    async append (key: string, uploadId: string, input: AppendInput): Promise<{ receipt: AppendReceipt, cut?: unknown }> {
      const previous = input.previous as AppendReceipt | undefined
      const first = previous?.nextPart ?? 1
      const carried = previous?.tail
      const body = new AppendBody(input.body, input.observe)
      const bodyBytes = body[Symbol.asyncIterator]()
      let tailBody: Readable | undefined
      try {
        // An append that brings nothing must not copy the tail to a new object: look first.
        const head = await bodyBytes.next()
        if (head.done === true) {
          return { receipt: { size: 0, append: true, parts: [], nextPart: first, ...(carried !== undefined ? { tail: carried } : {}) }, cut: body.cut }
        }
        if (carried !== undefined) tailBody = (await s3.get(carried.object)).body
        const fromTail = tailBody
        async function * source (): AsyncGenerator<Buffer> {
          if (fromTail !== undefined) yield * tailBytes(fromTail, carried!.size)
          yield head.value
          yield * bodyBytes
        }
        // Part numbers first…9,999 (10,000 is the final tail's): at most `room` pieces, each
        // partSize bytes but the last, which may hold up to 5 MiB − 1 more (or be a tail).
        const room = FINAL_PART - first
        const maxBytes = room * s3.pool.partSize + MIN_PART - 1
        const parts: PartRef[] = []
        let tail: Tail | undefined
        const { size } = await streamParts(source(), {
          pool: s3.pool,
          concurrency: s3.queueSize,
          holdBack: MIN_PART,
          maxBytes,
          maxLength: input.maxLength === undefined ? undefined : input.maxLength + (carried?.size ?? 0),
          ticket: ticketOf(input.ticket),
          tooLarge: () => new DropcodeError('DROPCODE_FILE_TOO_LARGE', `An upload may take at most ${maxBytes} more bytes here (S3 allows 10,000 parts).`),
          sendPart: async (i, data, length, again) => {
            parts.push({ n: first + i, etag: await s3.uploadPart(key, uploadId, first + i, data, length, again), size: length })
          },
          sendWhole: async (data, length, again) => {
            if (length >= MIN_PART) {
              parts.push({ n: first, etag: await s3.uploadPart(key, uploadId, first, data, length, again), size: length })
              return
            }
            const object = `${key}.chunk-tail-${randomBytes(6).toString('hex')}`
            await s3.putObject(object, data, length, again)
            tail = { object, size: length }
          }
        })
        if (size !== (carried?.size ?? 0) + body.bytes) throw new Error(`stored ${size} bytes, expected ${(carried?.size ?? 0) + body.bytes}`)
        parts.sort((a, b) => a.n - b.n)
        const receipt: AppendReceipt = { size: body.bytes, append: true, parts, nextPart: first + parts.length, ...(tail !== undefined ? { tail } : {}) }
        return { receipt, cut: body.cut }
      } catch (err) {
        input.body.destroy()
        tailBody?.destroy()
        throw gone(err)
      }
    },

    /** Frees what only an unrecorded receipt holds: the tail it wrote (its parts are overwritten by the next append, or strays at completion). */
    async discard (receipt: AppendReceipt): Promise<void> {
      if (receipt.size > 0 && receipt.tail !== undefined) await s3.delete(receipt.tail.object)
    },

    async complete (key: string, uploadId: string, receipts: AppendReceipt[]): Promise<{ size: number }> {
      const size = receipts.reduce((n, r) => n + r.size, 0)
      if (size === 0) {
        await s3.putEmpty(key)
        await s3.abortMultipart(key, uploadId).catch(() => {})
      } else {
        const parts = receipts.flatMap(r => r.parts)
        const tail = receipts[receipts.length - 1]!.tail
        if (tail !== undefined) {
          const { body } = await s3.get(tail.object).catch(err => { throw gone(err) })
          parts.push({ n: FINAL_PART, etag: await s3.uploadPart(key, uploadId, FINAL_PART, body, tail.size), size: tail.size })
        }
        const recorded = new Set(parts.map(p => p.n))
        const strays = (await s3.listParts(key, uploadId)).filter(p => !recorded.has(p.n))
        if (strays.length === 0) await s3.completeMultipart(key, uploadId, parts)
        else await completeAround(key, uploadId, parts, strays, tail)
      }
      await deleteChunkObjects(s3, key, [])
      return { size }
    }
  }
}
