/**
 * Appends to a resumable upload (tus; routes/tus.ts): a session without a chunk count whose
 * chunks are the appends, in order, each stored right after the one before
 * (`BlobStore.appendChunk`). Everything about one upload is in the state and in storage, so any
 * instance takes any request of it:
 * - the upload's offset is the sum of its recorded appends; an append must name it (409 with
 *   the offset otherwise);
 * - an append holds the lock of the next index (the session's chunk lock, a lease renewed by
 *   heartbeat): a second request at the same offset meanwhile is answered 423 with Retry-After,
 *   the lease left (its holder may have died with its instance; then waiting that long is all it
 *   takes). Having the lock, the append reads the upload again: a request that raced it to the
 *   same offset and won recorded that index already, and this one answers 409;
 * - an append cut midway (the client went, the stall guard cut it) keeps what arrived: the
 *   driver stores every byte it took and the append is recorded with that size, so HEAD reports
 *   it and the client resumes from there. An append with a checksum is kept only whole and
 *   matching (460 otherwise): a cut one cannot be checked;
 * - the bytes count toward the key's quota as a chunk's do (the request's hold keeps them as the
 *   session's), and the append that reaches the upload's length completes it through the
 *   chunked sessions' own completion (sessions.ts): the same publish, record and answer.
 */
import { createHash, randomBytes } from 'node:crypto'
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream'
import type { BlobStore, ChunkReceipt } from '../blob/index.js'
import { DropcodeError } from '../core/errors.js'
import { chunkIdentity, ownedBy, type ChunkRecord, type ResumableInfo, type SessionView } from '../core/model.js'
import type { CompletedFile, SessionStore } from '../state/index.js'
import { sizeLimit, type UploadLimits } from './files.js'
import { overLimit, whose, type ApiKey } from './keys.js'
import type { PrefixDigests } from './prefix-digest.js'
import { sessionItem } from './quota.js'

/** What an append request says besides its body. */
export interface AppendRequest {
  /** Upload-Offset: where the client believes the upload ends. */
  offset: number
  /** Upload-Length sent with this append (an upload whose length was deferred). */
  length?: number | undefined
  /** Upload-Checksum: the digest of this append's bytes by `algorithm` (a node:crypto name). */
  checksum?: { algorithm: string, digest: Buffer } | undefined
  /**
   * The upload ends with this append's last byte (the IETF draft's `Upload-Complete: ?1`):
   * without a known length, its length becomes what is stored once the body arrived whole.
   */
  completes?: boolean | undefined
}

/** Where an upload stands after an append (or a HEAD). */
export interface UploadProgress {
  /** Bytes stored. */
  offset: number
  /** Upload-Length, when known. */
  length: number | undefined
  /** The raw Upload-Metadata, if any. */
  metadata: string | undefined
  /** The published file, once the upload reached its length. */
  completed?: CompletedFile | undefined
  /** A partial upload of a later concatenation (never published by itself). */
  partial?: boolean
}

export interface AppendContext {
  blobs: BlobStore
  sessions: SessionStore
  prefixes: PrefixDigests
  now: () => number
  /** ms a session lives without activity. */
  ttl: number
  /** ms a lock lasts without a heartbeat. */
  lockMs: number
  keepLock: (id: string, index: number, token: string, lost: (err: DropcodeError) => void) => () => void
  discard: (blobKey: string, handle: string, record: ChunkRecord | null) => Promise<void>
  complete: (id: string, key: ApiKey) => Promise<CompletedFile>
}

/** Where an open resumable upload stands, from its session and its appends. */
export function progressOf ({ session, chunks }: SessionView): UploadProgress & { count: number, last: ChunkRecord | undefined } {
  const info = JSON.parse(session.resumable ?? '{}') as ResumableInfo
  let offset = 0
  let length = info.length
  for (let i = 0; i < chunks.size; i++) {
    const c = chunks.get(i)
    // Appends are recorded in order, each under the lock of the next index: never a gap.
    if (c === undefined) throw new Error(`resumable upload ${session.id} lacks append ${i} of ${chunks.size}`)
    offset += c.size
    length ??= c.declaresLength
  }
  return { offset, length, metadata: info.metadata, partial: info.partial === true, count: chunks.size, last: chunks.get(chunks.size - 1) }
}

/** 409: the client's offset is not the upload's (the body adds it; the route sends it as Upload-Offset). */
export const offsetMismatch = (offset: number) =>
  new DropcodeError('DROPCODE_OFFSET_MISMATCH', `This upload holds ${offset} bytes: resume from Upload-Offset ${offset}.`, { offset })

/**
 * The refusal for a lease in the way until `until` (epoch ms, its holder may have died), with
 * Retry-After: the seconds left, rounded up.
 */
export function leaseInTheWay (code: 'DROPCODE_SESSION_BUSY' | 'DROPCODE_UPLOAD_LOCKED', until: number, now: number, message: (seconds: number) => string): DropcodeError {
  const seconds = Math.max(1, Math.ceil((until - now) / 1000))
  return new DropcodeError(code, message(seconds), { retry_after: seconds })
}

/** Where a completed upload stands: its file's size is its offset and length. */
const completedAt = (done: CompletedFile): UploadProgress => ({ offset: done.size, length: done.size, metadata: undefined, completed: done })

/** Stops a body after `max` bytes with `error()`. */
class Cap extends Transform {
  private bytes = 0
  constructor (private readonly max: number, private readonly error: () => Error) { super() }
  override _transform (chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.bytes += chunk.length
    if (this.bytes > this.max) { done(this.error()); return }
    done(null, chunk)
  }
}

export function createAppends (ctx: AppendContext) {
  const { blobs, sessions, prefixes, now, ttl, lockMs } = ctx

  /** The upload `id` as `key` may see it: open (its view), or completed (its result). */
  async function find (id: string, key: ApiKey): Promise<{ view: SessionView } | { done: CompletedFile }> {
    const view = await sessions.get(id, now())
    if (view !== null && view.session.resumable !== undefined && ownedBy(view.session, key.name)) return { view }
    if (view === null) {
      const done = await sessions.completed(id, now())
      if (done !== null && ownedBy(done.session, key.name)) return { done: done.result }
    }
    throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND', 'No such upload: it may have expired, been terminated or never existed.')
  }

  /** Takes the lock of append `index` (423 with the lease left while another request holds it). */
  async function lock (id: string, index: number, key: ApiKey): Promise<string> {
    const token = randomBytes(12).toString('base64url')
    const begun = await sessions.beginChunk(id, index, token, now() + lockMs, now(), ttl, key.name)
    if (begun.ok) return token
    if (begun.reason === 'unknown') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
    throw leaseInTheWay('DROPCODE_UPLOAD_LOCKED', begun.until, now(), seconds => `Another request is appending to this upload, or completing it, and may have died with its instance: its lease runs out in ${seconds} s if so; retry then.`)
  }

  return {
    /** Where upload `id` stands (HEAD). */
    async progress (id: string, key: ApiKey): Promise<UploadProgress> {
      const found = await find(id, key)
      if ('done' in found) return completedAt(found.done)
      return progressOf(found.view)
    },

    /**
     * Appends `body` at `request.offset`; completes the upload when it reaches its length.
     * `limits`: the request's declared length, admission ticket and quota hold.
     */
    async append (id: string, body: Readable, key: ApiKey, request: AppendRequest, limits: UploadLimits): Promise<UploadProgress> {
      const { hold } = limits
      try {
        const found = await find(id, key)
        if ('done' in found) {
          // A repeated final append (its answer was lost): the same answer, if it sends nothing more.
          if (request.offset !== found.done.size) throw offsetMismatch(found.done.size)
          return completedAt(found.done)
        }
        const before = progressOf(found.view)
        if (request.offset !== before.offset) throw offsetMismatch(before.offset)
        let length = before.length
        if (request.length !== undefined) {
          if (length !== undefined && request.length !== length) throw new DropcodeError('DROPCODE_INVALID_FIELD', `Upload-Length is ${length} bytes already; it cannot change.`)
          if (request.length < before.offset) throw new DropcodeError('DROPCODE_INVALID_FIELD', `Upload-Length must be at least the ${before.offset} bytes stored.`)
          length = request.length
        }
        const { maxFileSize } = key.limits
        if (length !== undefined && length > maxFileSize) {
          throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `Upload-Length ${length} is more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
        }
        const declares = request.length !== undefined && before.length === undefined ? request.length : undefined
        const stored = await store(found.view, before, body, key, request, limits, length, declares)
        await hold?.keep(sessionItem(id), stored.size, now() + ttl)
        const offset = before.offset + stored.size
        if (length === undefined && request.completes === true && stored.cut === undefined) length = offset
        if (stored.cut !== undefined) {
          // (The client is gone, or going: this answer is for the log.)
          throw new DropcodeError('DROPCODE_BAD_REQUEST', `The request ended before its body did; the ${offset} bytes stored are kept: resume from there.`, { offset }, { cause: stored.cut })
        }
        const progress = { offset, length, metadata: before.metadata, partial: before.partial }
        // A partial upload waits for its final one (concatenation.ts).
        if (length !== undefined && offset === length && !before.partial) return { ...progress, completed: await ctx.complete(id, key) }
        return progress
      } finally {
        await hold?.release()
      }
    }
  }

  /** Streams one append under the lock of its index and records it (see the top). */
  async function store (view: SessionView, before: ReturnType<typeof progressOf>, body: Readable, key: ApiKey, request: AppendRequest, limits: UploadLimits, length: number | undefined, declaresBefore: number | undefined): Promise<{ size: number, cut?: unknown }> {
    const { session } = view
    const { id } = session
    const index = before.count
    const token = await lock(id, index, key)
    const release = async (record: ChunkRecord | null) => {
      await ctx.discard(session.blobKey, session.handle, record)
      await sessions.abortChunk(id, index, token, now()).catch(() => null)
    }
    const again = await sessions.get(id, now()).catch(async (err: unknown) => { await release(null); throw err })
    const recorded = again?.chunks.get(index)
    if (again === null || recorded !== undefined) {
      // Another request recorded this index between our read and our lock: give the lock back
      // with its record unchanged (an abort would forget it).
      if (recorded !== undefined) await sessions.commitChunk(id, index, token, recorded, now(), ttl).catch(() => {})
      throw again === null ? new DropcodeError('DROPCODE_SESSION_NOT_FOUND') : offsetMismatch(progressOf(again).offset)
    }
    const room = (length ?? key.limits.maxFileSize) - before.offset
    const { hold } = limits
    const cap = hold !== undefined && hold.max < room
      ? new Cap(hold.max, sizeLimit(hold).error)
      : new Cap(room, () => length !== undefined
        ? new DropcodeError('DROPCODE_FILE_TOO_LARGE', `The append goes past Upload-Length (${length} bytes); nothing of it was kept.`)
        : overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The upload grows past ${whose(key, 'maxFileSize')}'s file limit of ${key.limits.maxFileSize} bytes; nothing of this append was kept.`))
    pipeline(body, cap, () => {})
    const check = request.checksum !== undefined ? createHash(request.checksum.algorithm) : undefined
    // A partial upload's bytes are hashed by its final upload, once, in their place among the
    // other partials' (concatenation.ts): not here. Folded as they stream, other bytes are hashed
    // once too: the record names them by the running digest.
    const hashed = !before.partial
    const fold = hashed ? prefixes.streamFold(id, index) : undefined
    const sha256 = hashed && fold === undefined ? createHash('sha256') : undefined
    const kept = hashed && fold === undefined ? prefixes.retain() : undefined
    const stopLock = ctx.keepLock(id, index, token, err => cap.destroy(err))
    let receipt: ChunkReceipt
    let cut: unknown
    try {
      ({ receipt, cut } = await blobs.appendChunk(session.blobKey, session.handle, {
        body: cap,
        offset: before.offset,
        previous: before.last !== undefined ? JSON.parse(before.last.receipt) as ChunkReceipt : undefined,
        observe: data => { check?.update(data); if (fold !== undefined) fold.update(data); else { sha256?.update(data); kept?.add(data) } },
        maxLength: limits.maxLength,
        ticket: limits.ticket
      }))
    } catch (err) {
      fold?.fail()
      kept?.release()
      stopLock()
      body.destroy()
      await release(null)
      throw err
    }
    stopLock()
    // An append that completes an upload of unknown length declares it: what arrived, if whole.
    const declares = declaresBefore ?? (request.completes === true && length === undefined && cut === undefined ? before.offset + receipt.size : undefined)
    const identity = fold !== undefined ? { sha256: '', through: fold.running() } : { sha256: sha256?.digest('hex') ?? '' }
    const record: ChunkRecord = { size: receipt.size, ...identity, receipt: JSON.stringify(receipt), ...(declares !== undefined ? { declaresLength: declares } : {}) }
    // Our own refusals (past the length, a lost lock) keep nothing; a checksum is checked whole.
    const refusal = cut instanceof DropcodeError ? cut : undefined
    const mismatch = request.checksum !== undefined && (cut !== undefined || !check!.digest().equals(request.checksum.digest))
    if (refusal !== undefined || mismatch || (record.size === 0 && declares === undefined)) {
      fold?.fail()
      kept?.release()
      await release(record.size === 0 && refusal === undefined && !mismatch ? null : record)
      if (refusal !== undefined) throw refusal
      if (mismatch && cut === undefined) throw new DropcodeError('DROPCODE_CHECKSUM_MISMATCH')
      return { size: 0, cut }
    }
    fold?.done(chunkIdentity(record), record.size)
    const committed = await sessions.commitChunk(id, index, token, record, now(), ttl).catch((err: unknown) => { kept?.release(); throw err })
    if (!committed.ok) {
      kept?.release()
      await ctx.discard(session.blobKey, session.handle, record)
      throw committed.reason === 'gone'
        ? new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
        : new DropcodeError('DROPCODE_UPLOAD_LOCKED', 'This append lost its lock (its heartbeat failed); resume from HEAD\'s Upload-Offset.', { retry_after: 1 })
    }
    const read = blobs.readChunk !== undefined ? () => blobs.readChunk!(session.blobKey, session.handle, receipt) : undefined
    if (hashed) prefixes.committed(id, index, record, { folded: fold !== undefined, kept, read })
    return cut !== undefined ? { size: record.size, cut } : { size: record.size }
  }
}
