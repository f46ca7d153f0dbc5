/**
 * Chunked upload sessions, independent of HTTP. A session lives in the StateStore (any
 * instance can take any request) and its bytes in the BlobStore's chunked upload; this module
 * keeps the two in step:
 * - a chunk holds a short lock on its index while it streams (heartbeat-extended), so two
 *   requests for one index never interleave; a failed attempt forgets the index (it may have
 *   overwritten the earlier data), so verify reports it missing and the client resends;
 * - completion is claimed atomically (one completer per session, others get 409), checks for
 *   missing chunks and the file-size limit, assembles the object, publishes it under a code, and
 *   ends the session; a repeated complete answers the same code.
 */
import { pipeline, type Readable } from 'node:stream'
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { BlobStore, ChunkReceipt } from '../blob/blob-store.js'
import { DropcodeError } from '../errors.js'
import { cleanFilename } from '../http/filename.js'
import { newBlobKey } from '../ids.js'
import type { SessionView, StateStore } from '../state/index.js'
import type { Metrics } from '../metrics.js'
import type { InFlight } from './in-flight.js'
import { SizeLimit, type FileService } from './files.js'

const LOCK_MS = 120_000 // a chunk's lock; extended every LOCK_MS / 4 while it streams
const COMPLETE_LEASE_MS = 15 * 60_000 // a completer that dies frees the session after this

export interface SessionServiceOptions {
  blobs: BlobStore
  state: StateStore
  files: FileService
  log: FastifyBaseLogger
  metrics: Metrics
  /** Chunk uploads are tracked so a shutdown waits for their cleanup. */
  inFlight: InFlight
  now: () => number
  /** Bytes. */
  maxChunkSize: number
  /** Bytes, for the assembled file. */
  maxFileSize: number
  /** ms a session lives without activity. */
  sessionTtlMs: number
  /** ms an abandoned session's storage outlives the session before it is swept. */
  graceMs: number
}

export interface SessionSettings {
  filename: string
  totalChunks: number
  maxDownloads: number
  expiryHours: number
}

export type SessionService = ReturnType<typeof createSessionService>

export function createSessionService (opts: SessionServiceOptions) {
  const { blobs, state, files, log, now } = opts
  const timing = () => {
    const at = now()
    return { now: at, ttlMs: opts.sessionTtlMs, blobDeadline: at + opts.sessionTtlMs + opts.graceMs }
  }
  const discard = async (blobKey: string, handle: string, receipt: string | null) => {
    if (receipt === null) return
    await blobs.discardChunk(blobKey, handle, JSON.parse(receipt) as ChunkReceipt)
      .catch(err => log.warn({ err }, 'could not discard a replaced chunk; the sweeper removes it with the session'))
  }

  async function receiveChunk (id: string, index: number, body: Readable): Promise<{ received: number, total: number }> {
    const begun = await state.beginChunk(id, index, now() + LOCK_MS, timing())
    if (!begun.ok) {
      throw begun.reason === 'unknown'
        ? new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
        : new DropcodeError('DROPCODE_SESSION_BUSY', begun.reason === 'locked' ? `Chunk ${index} is being uploaded by another request.` : undefined)
    }
    const { session } = begun
    if (index >= session.totalChunks) {
      await state.abortChunk(id, index)
      throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "chunk_index" must be from 0 to ${session.totalChunks - 1}.`)
    }
    const heartbeat = setInterval(() => {
      state.extendChunkLock(id, index, now() + LOCK_MS).catch(() => {})
    }, LOCK_MS / 4)
    const limited = new SizeLimit(opts.maxChunkSize, 'DROPCODE_CHUNK_TOO_LARGE')
    pipeline(body, limited, () => {})
    let receipt: ChunkReceipt
    try {
      receipt = await blobs.putChunk(session.blobKey, session.handle, {
        index,
        total: session.totalChunks,
        body: limited,
        settleLayout: wanted => state.settleLayout(id, wanted)
      })
    } catch (err) {
      body.destroy()
      await discard(session.blobKey, session.handle, await state.abortChunk(id, index).catch(() => null))
      throw err
    } finally {
      clearInterval(heartbeat)
    }
    const json = JSON.stringify(receipt)
    const committed = await state.commitChunk(id, index, json, timing()).catch(async err => {
      await discard(session.blobKey, session.handle, json)
      throw err
    })
    if (committed === null) {
      await discard(session.blobKey, session.handle, json)
      throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
    }
    if (committed.previous !== null && committed.previous !== json) await discard(session.blobKey, session.handle, committed.previous)
    if (committed.bytes > opts.maxFileSize) {
      await discard(session.blobKey, session.handle, await state.abortChunk(id, index))
      throw new DropcodeError('DROPCODE_FILE_TOO_LARGE', `The chunks add up to more than the file limit of ${opts.maxFileSize} bytes.`)
    }
    return { received: committed.received, total: session.totalChunks }
  }

  return {
    async start (settings: SessionSettings): Promise<string> {
      const id = randomBytes(16).toString('base64url')
      const blobKey = newBlobKey()
      // Indexed for cleanup before storage is touched, so nothing can be left unfound.
      await state.scheduleBlobCleanup(blobKey, timing().blobDeadline)
      const handle = await blobs.beginChunked(blobKey)
      await state.createSession({
        id,
        blobKey,
        handle,
        filename: cleanFilename(settings.filename),
        totalChunks: settings.totalChunks,
        maxDownloads: settings.maxDownloads,
        expiryHours: settings.expiryHours,
        createdAt: now()
      }, timing())
      opts.metrics.session('opened')
      return id
    },

    /** Streams one chunk into the session's storage and records it. */
    receiveChunk (id: string, index: number, body: Readable): Promise<{ received: number, total: number }> {
      return opts.inFlight.track(receiveChunk(id, index, body))
    },

    /** Forgets a chunk this request stored when the rest of the request is refused (4xx means nothing was recorded). */
    async dropChunk (id: string, index: number): Promise<void> {
      const view = await state.getSession(id)
      const receipt = await state.abortChunk(id, index)
      if (view !== null) await discard(view.session.blobKey, view.session.handle, receipt)
    },

    async status (id: string): Promise<SessionView> {
      const view = await state.getSession(id)
      if (view === null) throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
      return view
    },

    /** Assembles and publishes the file; returns its code (the same code when repeated). */
    async complete (id: string): Promise<string> {
      const started = await state.beginCompletion(id, now(), now() + COMPLETE_LEASE_MS)
      if (started.status === 'done') return started.code
      if (started.status === 'unknown') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
      if (started.status === 'busy') throw new DropcodeError('DROPCODE_SESSION_BUSY')
      const { session, receipts } = started
      try {
        const missing: number[] = []
        for (let i = 0; i < session.totalChunks; i++) if (!receipts.has(i)) missing.push(i)
        if (missing.length > 0) {
          throw new DropcodeError('DROPCODE_CHUNKS_MISSING', `${missing.length} of ${session.totalChunks} chunks are missing; send them and complete again.`, {
            missing_chunks: missing,
            received_chunks: receipts.size,
            total_chunks: session.totalChunks
          })
        }
        const ordered = [...Array(session.totalChunks).keys()].map(i => JSON.parse(receipts.get(i)!) as ChunkReceipt)
        const size = ordered.reduce((n, r) => n + r.size, 0)
        if (size > opts.maxFileSize) throw new DropcodeError('DROPCODE_FILE_TOO_LARGE', `The chunks add up to more than the file limit of ${opts.maxFileSize} bytes.`)
        await blobs.completeChunked(session.blobKey, session.handle, ordered)
        const file = await files.publish({ key: session.blobKey, size, filename: session.filename }, {
          maxDownloads: session.maxDownloads,
          expiryHours: session.expiryHours
        }, 'chunked')
        await state.finishSession(id, file.code, opts.sessionTtlMs)
        opts.metrics.session('completed')
        return file.code
      } catch (err) {
        await state.releaseCompletion(id).catch(() => {})
        throw err
      }
    }
  }
}
