/**
 * Chunked upload sessions, independent of HTTP. A session lives in the state (any instance can
 * take any request) and its bytes in the BlobStore's chunked upload; this module keeps the two
 * in step:
 * - a chunk holds a lock on its index while it streams (a lease renewed by heartbeat), so two
 *   requests for one index never write at once; a request whose lease cannot be renewed stops
 *   writing before the lease runs out. A failed attempt forgets the index (it may have
 *   overwritten the earlier data), so verify reports it missing and the client resends;
 * - a chunk is recorded only once its whole request was read and accepted (two steps:
 *   `receiveChunk` stores, its pending chunk's `commit` checks a declared digest and records;
 *   pending.ts), so a request answered with an error records nothing;
 * - completion is claimed atomically (one completer per session, others get 409), checks for
 *   missing chunks and the file-size limit, assembles the object, publishes it under a code, and
 *   ends the session; a repeated complete answers the same code. Its lease is as short as a
 *   chunk lock's and renewed the same way, so when its instance dies another takes over within
 *   CHUNK_LOCK_SECONDS, finding the object already whole if the dead one got that far;
 * - a 409 names when the lease in the way runs out (Retry-After, whole seconds rounded up): the
 *   holder may be a request whose instance died, and then waiting that long is all it takes;
 * - a session belongs to the API key that opened it (its `keyId`, the key's name): every other
 *   key is answered as for an unknown session, and each key holds at most its `maxOpenSessions`
 *   (MAX_OPEN_SESSIONS_PER_KEY unless the key says less; 403 beyond), reserved before any
 *   storage is touched;
 * - the chunks' bytes count toward the key's quota (quota.ts): each chunk request reserves its
 *   length first, a recorded chunk's bytes become the session's item, and the session's item
 *   becomes its file's when it completes;
 * - a completed session is still reported (settings, chunks, result) for as long as a repeated
 *   complete answers its code: both read the one record `finish` wrote, so the windows agree.
 */
import { createHash, randomBytes } from 'node:crypto'
import { pipeline, type Readable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import type { BlobStore, ChunkReceipt } from '../blob/index.js'
import { DropcodeError } from '../core/errors.js'
import { maskSecret } from '../core/mask.js'
import { cleanFilename } from '../core/filename.js'
import { newBlobKey } from '../core/ids.js'
import { chunkIdentity, ownedBy, sessionOwner, type ChunkRecord, type ResumableInfo, type SessionView, type UploadSession } from '../core/model.js'
import { Sha256Meter } from '../core/streams.js'
import type { Metrics } from '../metrics.js'
import type { CleanupIndex, CompletedFile, CompletedSession, SessionStore } from '../state/index.js'
import { sizeLimit, type FileService, type UploadLimits } from './files.js'
import type { InFlight } from './in-flight.js'
import { overLimit, whose, type ApiKey } from './keys.js'
import { fileItem, sessionItem, type Quota } from './quota.js'
import { createAppends, leaseInTheWay, progressOf } from './appends.js'
import { createConcatenation } from './concatenation.js'
import { checkDigest, type Pending } from './pending.js'
import { createPrefixDigests, type PrefixSnapshot } from './prefix-digest.js'

export interface SessionServiceOptions {
  blobs: BlobStore
  sessions: SessionStore
  cleanup: CleanupIndex
  files: FileService
  /** Keys' ledgers (the chunks' bytes count toward the key's quota). */
  quota: Quota
  log: FastifyBaseLogger
  metrics: Metrics
  /** Chunk uploads are tracked so a shutdown waits for their cleanup. */
  inFlight: InFlight
  now: () => number
  /** Bytes. */
  maxChunkSize: number
  /** ms a session lives without activity. */
  sessionTtlMs: number
  /** ms an abandoned session's storage outlives the session before it is swept. */
  graceMs: number
  /** ms a chunk's lock, or a completion's lease, lasts without a heartbeat (renewed every third of it). */
  chunkLockMs: number
}

export interface SessionSettings {
  filename: string
  totalChunks: number
  maxDownloads: number
  expiryHours: number
  /** SHA-256 the client declares for the whole file (lowercase hex), checked at completion. */
  sha256?: string | undefined
  /** Bytes in every chunk but the last (which holds at most as many); undefined: any sizes. */
  chunkSize?: number | undefined
  /** A resumable (tus) upload: no chunk count, its chunks are appends (appends.ts). */
  resumable?: ResumableInfo | undefined
}

/** A chunk stored but not yet recorded (pending.ts): `commit` records it, `abort` forgets it. */
export type PendingChunk = Pending<{ received: number, total: number }>

export type SessionStatus =
  | SessionView & { completed: false }
  | CompletedSession & { completed: true }

export type SessionService = ReturnType<typeof createSessionService>

export function createSessionService (opts: SessionServiceOptions) {
  const { blobs, sessions, cleanup, files, log, now } = opts
  const ttl = opts.sessionTtlMs
  const lockMs = opts.chunkLockMs
  // 64 MiB: the chunks of a few sessions with 4 × 8 MiB in flight (S3; fs reads them back instead).
  const prefixes = createPrefixDigests({ now, idleMs: ttl, retainBytes: 64 * 1024 * 1024 })
  /** How long a completion waits for chunks being read back into the running SHA-256. */
  const foldWaitMs = 10_000
  const discard = async (blobKey: string, handle: string, record: ChunkRecord | null) => {
    if (record === null) return
    await blobs.discardChunk(blobKey, handle, JSON.parse(record.receipt) as ChunkReceipt)
      .catch(err => log.warn({ err }, 'could not discard a replaced chunk; the sweeper removes it with the session'))
  }

  /** 409 for a lease in the way until `until`, with Retry-After: the seconds left, rounded up. */
  const busy = (until: number, message: (seconds: number) => string) => leaseInTheWay('DROPCODE_SESSION_BUSY', until, now(), message)

  /** Renews a chunk lock every third of its lease; calls `lost` when it cannot be kept. */
  function keepLock (id: string, index: number, token: string, lost: (err: DropcodeError) => void) {
    let heldUntil = now() + lockMs
    const timer = setInterval(() => {
      const until = now() + lockMs
      sessions.extendChunk(id, index, token, until, now()).then(held => {
        if (held) heldUntil = until
        else lost(new DropcodeError('DROPCODE_SESSION_BUSY', `Chunk ${index} lost its upload lock; send it again.`))
      }, err => {
        // Stop writing before the lease can run out: another request may then take the index.
        if (now() >= heldUntil - lockMs / 3) lost(new DropcodeError('DROPCODE_SESSION_BUSY', `Chunk ${index} lost its upload lock; send it again.`, undefined, { cause: err }))
      })
    }, lockMs / 3)
    timer.unref()
    return () => clearInterval(timer)
  }

  /**
   * Stores one chunk under its lock: the lock taken (`lockChunk`), the bytes streamed to storage
   * while hashed and folded (`storeChunk`), then a pending chunk that the route commits (records
   * it: `commitChunk`) or aborts.
   */
  async function receiveChunk (id: string, index: number, body: Readable, key: ApiKey, limits: UploadLimits): Promise<PendingChunk> {
    const { hold } = limits
    const lock = await lockChunk(id, index, key).catch(async (err: unknown) => { await hold?.release(); throw err })
    const stored = await storeChunk(lock, body, limits).catch(async (err: unknown) => { await hold?.release(); throw err })
    const { session } = lock
    let settled = false
    const pending: PendingChunk = {
      sha256: stored.record.sha256,
      size: stored.record.size,
      async abort () {
        if (settled) return
        settled = true
        stored.kept?.release()
        stored.stopLock()
        await discard(session.blobKey, session.handle, stored.record)
        await lock.abort()
        await hold?.release()
      },
      async commit ({ sha256 }) {
        await checkDigest(pending, sha256, `Chunk ${index}'s SHA-256 differs from chunk_sha256; it was not stored: send it again.`)
        settled = true
        stored.stopLock()
        const committed = await commitChunk(lock, stored).catch(async (err: unknown) => { await hold?.release(); throw err })
        // The chunk's bytes (less those of the chunk it replaced) become the session's.
        await hold?.keep(sessionItem(id), stored.record.size - (committed.previous?.size ?? 0), now() + ttl)
        return { received: committed.received, total: committed.total }
      }
    }
    return pending
  }

  /** A chunk index locked for one request: `token` names the lock, `abort()` releases it. */
  interface ChunkLock { id: string, index: number, key: ApiKey, token: string, session: UploadSession, abort: () => Promise<void> }

  /** Takes chunk `index`'s lock (409 with the lease left while another request holds it, or the session completes). */
  async function lockChunk (id: string, index: number, key: ApiKey): Promise<ChunkLock> {
    const token = randomBytes(12).toString('base64url')
    const begun = await sessions.beginChunk(id, index, token, now() + lockMs, now(), ttl, key.name)
    if (!begun.ok) {
      if (begun.reason === 'unknown') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
      throw begun.reason === 'locked'
        ? busy(begun.until, s => `Chunk ${index} is locked by another request, which may have died with its instance: its lock runs out in ${s} s if so; retry then.`)
        : busy(begun.until, s => `The session is completing, in a request that may have died with its instance: its lease runs out in ${s} s if so; retry then.`)
    }
    const { session } = begun
    const abort = async () => { await discard(session.blobKey, session.handle, await sessions.abortChunk(id, index, token, now()).catch(() => null)) }
    if (index >= session.totalChunks) {
      await abort()
      throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "chunk_index" must be from 0 to ${session.totalChunks - 1}.`)
    }
    return { id, index, key, token, session, abort }
  }

  /** A chunk in storage, not yet recorded: its record, its fold into the file's digest, its kept bytes. */
  interface StoredChunk {
    record: ChunkRecord
    fold: ReturnType<typeof prefixes.streamFold>
    kept: ReturnType<typeof prefixes.retain> | undefined
    stopLock: () => void
  }

  /**
   * Streams the body into storage, hashing it and folding it into the file's running SHA-256 (or
   * keeping its bytes for the fold at its turn, if they fit). On any failure nothing is left:
   * the stored part discarded, the lock released.
   */
  async function storeChunk (lock: ChunkLock, body: Readable, { maxLength, ticket, hold }: UploadLimits): Promise<StoredChunk> {
    const { id, index, token, session } = lock
    const { chunkSize } = session
    const fold = prefixes.streamFold(id, index)
    // Not foldable now: keep its bytes for the fold at its turn, if they fit.
    const kept = fold === undefined ? prefixes.retain() : undefined
    const max = Math.min(opts.maxChunkSize, chunkSize ?? Infinity)
    const limit = hold !== undefined && hold.max < max ? sizeLimit(hold, 'chunk') : { max, code: 'DROPCODE_CHUNK_TOO_LARGE' as const }
    const meter = new Sha256Meter(limit, fold?.update ?? kept?.add)
    const stopLock = keepLock(id, index, token, err => meter.destroy(err))
    pipeline(body, meter, () => {})
    try {
      const receipt = await blobs.putChunk(session.blobKey, session.handle, {
        index,
        total: session.totalChunks,
        body: meter,
        maxLength,
        ticket,
        chunkSize,
        settleLayout: wanted => sessions.settleLayout(id, wanted, now())
      })
      const record: ChunkRecord = { size: meter.bytes, sha256: meter.hex(), receipt: JSON.stringify(receipt) }
      if (chunkSize !== undefined && index < session.totalChunks - 1 && record.size !== chunkSize) {
        await discard(session.blobKey, session.handle, record)
        throw new DropcodeError('DROPCODE_CHUNK_SIZE_MISMATCH', `Chunk ${index} holds ${record.size} bytes; every chunk but the last must hold chunk_size = ${chunkSize} bytes. It was not stored.`)
      }
      fold?.done(record.sha256, record.size)
      return { record, fold, kept, stopLock }
    } catch (err) {
      fold?.fail()
      kept?.release()
      stopLock()
      body.destroy()
      await lock.abort()
      throw err
    }
  }

  /** Records a stored chunk under its lock; what it replaced is discarded. */
  async function commitChunk (lock: ChunkLock, { record, fold, kept }: StoredChunk): Promise<{ received: number, total: number, previous: ChunkRecord | null }> {
    const { id, index, key, token, session } = lock
    const { maxFileSize } = key.limits
    // A commit that fails may still be recorded (its answer lost: a paused Redis runs it when
    // it resumes), so its data is kept: completion removes every chunk object no record
    // names, and the sweeper an abandoned session's.
    const committed = await sessions.commitChunk(id, index, token, record, now(), ttl).catch((err: unknown) => { kept?.release(); throw err })
    if (!committed.ok) {
      kept?.release()
      await discard(session.blobKey, session.handle, record)
      throw committed.reason === 'gone'
        ? new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
        : new DropcodeError('DROPCODE_SESSION_BUSY', `Chunk ${index} lost its upload lock; send it again.`)
    }
    if (committed.previous !== null && committed.previous.receipt !== record.receipt) await discard(session.blobKey, session.handle, committed.previous)
    if (committed.bytes > maxFileSize) {
      kept?.release()
      // Record nothing: take the index back (a fresh lock, then abort it).
      const again = randomBytes(12).toString('base64url')
      if ((await sessions.beginChunk(id, index, again, now() + lockMs, now(), ttl, key.name)).ok) {
        await discard(session.blobKey, session.handle, await sessions.abortChunk(id, index, again, now()))
      }
      throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The chunks add up to more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
    }
    const receipt = JSON.parse(record.receipt) as ChunkReceipt
    const read = blobs.readChunk !== undefined ? () => blobs.readChunk!(session.blobKey, session.handle, receipt) : undefined
    prefixes.committed(id, index, record, { folded: fold !== undefined, kept, read })
    return { received: committed.received, total: session.totalChunks, previous: committed.previous }
  }

  /**
   * Renews a completion's lease every third of it (as keepLock does a chunk's). `confirm` renews
   * it at once before an irreversible step, and fails once another completer has taken it over.
   */
  function keepCompletion (id: string, token: string) {
    let lost = false
    const renew = async () => {
      if (!lost && !await sessions.extendCompletion(id, token, now() + lockMs, now(), ttl)) lost = true
    }
    const timer = setInterval(() => { renew().catch(() => {}) }, lockMs / 3)
    timer.unref()
    return {
      stop: () => clearInterval(timer),
      async confirm () {
        await renew()
        if (lost) throw busy(now() + lockMs / 3, s => `This completion lost its lease to another request; ask again in ${s} s for the result.`)
      }
    }
  }

  /**
   * Assembles the chunks into the object. A completer that died after assembling (its chunks
   * consumed) left the whole object: a takeover whose assembly fails uses it when its size is
   * the chunks' total (assembly writes the object at once or not at all).
   */
  async function assemble (session: UploadSession, ordered: ChunkRecord[], size: number): Promise<{ size: number, sha256?: string }> {
    try {
      return await blobs.completeChunked(session.blobKey, session.handle, ordered.map(c => JSON.parse(c.receipt) as ChunkReceipt))
    } catch (err) {
      const existing = await blobs.get(session.blobKey).then(({ body, size }) => { body.destroy(); return size }, () => undefined)
      if (existing !== size) throw err
      log.warn({ uploadId: maskSecret(session.id) }, 'completing a session whose object an earlier completer had already assembled')
      return { size }
    }
  }

  /**
   * The assembled object's SHA-256: from the driver if the bytes passed through it, else from the
   * running SHA-256 of the chunks folded as they arrived (`prefix`, when each folded chunk's
   * digest is its committed record's) and one streaming read of the rest of the object.
   */
  async function digestOf (blobKey: string, fromDriver: string | undefined, ordered: ChunkRecord[], size: number, prefix: PrefixSnapshot | undefined): Promise<string> {
    if (fromDriver !== undefined) {
      opts.metrics.sessionDigest('assembled', size)
      return fromDriver
    }
    const usable = prefix !== undefined && prefix.bytes <= size && prefix.digests.every((d, i) => ordered[i] !== undefined && chunkIdentity(ordered[i]) === d)
    const hash = usable ? prefix.hash : createHash('sha256')
    const start = usable ? prefix.bytes : 0
    if (start < size) {
      // Reads of 1 MiB: hashing 1 GiB back from the page cache took 1.0 s, against 1.3 s in 64 KiB ones.
      const { body } = await blobs.get(blobKey, { start, end: size - 1 }, { readSize: 1024 * 1024 })
      for await (const data of body as AsyncIterable<Buffer>) hash.update(data)
    }
    opts.metrics.sessionDigest('folded', start)
    opts.metrics.sessionDigest('read', size - start)
    return hash.digest('hex')
  }

  const service = {
    /** Opens a session for `key` (see services/keys.ts). */
    async start (settings: SessionSettings, key: ApiKey): Promise<string> {
      const keyId = key.name
      const { maxFileSize, maxOpenSessions } = key.limits
      const length = settings.resumable?.length
      if (length !== undefined && length > maxFileSize) {
        throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `Upload-Length ${length} is more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
      }
      if (settings.chunkSize !== undefined && (settings.totalChunks - 1) * settings.chunkSize > maxFileSize) {
        throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `${settings.totalChunks} chunks of ${settings.chunkSize} bytes add up to more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
      }
      const id = randomBytes(16).toString('base64url')
      const blobKey = newBlobKey()
      const at = now()
      if (!await sessions.reserve(keyId, id, at + ttl, at, maxOpenSessions)) {
        throw overLimit(key, 'maxOpenSessions', 'DROPCODE_TOO_MANY_SESSIONS', `${whose(key, 'maxOpenSessions')} has ${maxOpenSessions} open upload sessions, its limit; complete them or let them expire first.`)
      }
      try {
        // Indexed for cleanup (owned by the session) before storage is touched.
        await cleanup.schedule(blobKey, at + ttl + opts.graceMs, sessionOwner(id))
        const handle = await blobs.beginChunked(blobKey, { chunkSize: settings.chunkSize, append: settings.resumable !== undefined })
        await sessions.create({
          id,
          blobKey,
          handle,
          filename: cleanFilename(settings.filename),
          totalChunks: settings.totalChunks,
          maxDownloads: settings.maxDownloads,
          expiryHours: settings.expiryHours,
          createdAt: at,
          sha256: settings.sha256 ?? '',
          keyId,
          ...(settings.chunkSize !== undefined ? { chunkSize: settings.chunkSize } : {}),
          ...(settings.resumable !== undefined ? { resumable: JSON.stringify(settings.resumable) } : {})
        }, at, ttl)
      } catch (err) {
        // Else the place stays taken until the session would have expired.
        await sessions.release(keyId, id).catch(() => {})
        throw err
      }
      opts.metrics.session('opened')
      return id
    },

    /**
     * Streams one chunk into the session's storage; the caller then commits or aborts it.
     * `limits`: its declared length, its admission at the store's gate, its hold on the key's quota.
     */
    receiveChunk (id: string, index: number, body: Readable, key: ApiKey, limits: UploadLimits = {}): Promise<PendingChunk> {
      return opts.inFlight.track(receiveChunk(id, index, body, key, limits))
    },

    /**
     * What verify reports: an open session with its chunks, or a completed one with its result
     * for as long as a repeated complete answers it (the same record: one window for both).
     */
    async status (id: string, keyId: string): Promise<SessionStatus> {
      const view = await sessions.get(id, now())
      if (view !== null) {
        if (!ownedBy(view.session, keyId)) throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
        return { completed: false, ...view }
      }
      // Looked up second: a session that completes meanwhile is found here.
      const done = await sessions.completed(id, now())
      if (done === null || !ownedBy(done.session, keyId)) throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
      return { completed: true, ...done }
    },

    /**
     * Assembles and publishes the file; returns its code, size and digest (the same when
     * repeated). `sha256`: the digest the client expects (besides one declared at start).
     */
    async complete (id: string, key: ApiKey, sha256Expected?: string): Promise<CompletedFile> {
      const token = randomBytes(12).toString('base64url')
      const { maxFileSize } = key.limits
      const started = await sessions.beginCompletion(id, now(), now() + lockMs, key.name, token, ttl)
      if (started.status === 'done') {
        const { result } = started
        if (sha256Expected !== undefined && result.sha256 !== sha256Expected) {
          throw new DropcodeError('DROPCODE_DIGEST_MISMATCH', 'This session was completed already, as a file whose SHA-256 differs from the one sent.', { declared_sha256: sha256Expected, sha256: result.sha256 })
        }
        return result
      }
      if (started.status === 'unknown') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND')
      if (started.status === 'busy') {
        throw busy(started.until, s => `The session is completing, or a chunk of it is locked, by a request that may have died with its instance: its lease runs out in ${s} s if so; retry then.`)
      }
      const { session, chunks } = started
      const owner = key.name // the session's own key: the store answers no other
      const lease = keepCompletion(id, token)
      let assembled = false
      try {
        // A resumable upload's chunks are its appends, 0…n−1 (appends.ts), and must add up to its length.
        const count = session.resumable !== undefined ? chunks.size : session.totalChunks
        if (session.resumable !== undefined) {
          const { offset, length } = progressOf({ session, chunks })
          if (offset !== length) throw new DropcodeError('DROPCODE_CHUNKS_MISSING', `The upload holds ${offset} of its ${length ?? 'undeclared'} bytes.`)
        }
        const missing: number[] = []
        for (let i = 0; i < count; i++) if (!chunks.has(i)) missing.push(i)
        if (missing.length > 0) {
          throw new DropcodeError('DROPCODE_CHUNKS_MISSING', `${missing.length} of ${session.totalChunks} chunks are missing; send them and complete again.`, {
            missing_chunks: missing,
            received_chunks: chunks.size,
            total_chunks: session.totalChunks
          })
        }
        const ordered = [...Array(count).keys()].map(i => chunks.get(i)!)
        const size = ordered.reduce((n, c) => n + c.size, 0)
        if (size > maxFileSize) throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The chunks add up to more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
        // Taken before assembling: the chunks read back into it are gone once assembled.
        const prefix = await prefixes.snapshot(id, foldWaitMs)
        const built = await assemble(session, ordered, size)
        assembled = true
        const sha256 = await digestOf(session.blobKey, built.sha256, ordered, size, prefix)
        const declared = [session.sha256, sha256Expected ?? ''].find(d => d !== '' && d !== sha256)
        if (declared !== undefined) {
          // The chunks are consumed by assembling (S3 cannot reopen a completed multipart
          // upload), so the session ends here and the object goes.
          await files.discard({ key: session.blobKey, size, sha256, filename: session.filename })
          await sessions.remove(id)
          await opts.quota.drop(owner, sessionItem(id))
          prefixes.forget(id)
          throw new DropcodeError('DROPCODE_DIGEST_MISMATCH', 'The assembled file\'s SHA-256 differs from the one declared; nothing was stored and the session is closed: start again.', { declared_sha256: declared, sha256 })
        }
        // Publishing gives a code: only while the lease is surely ours for another lease period.
        await lease.confirm()
        const file = await files.publish({ key: session.blobKey, size, sha256, filename: session.filename }, {
          maxDownloads: session.maxDownloads,
          expiryHours: session.expiryHours,
          keyName: owner
        }, 'chunked')
        const result = { code: file.code, size, sha256 }
        await sessions.finish(id, result, now(), ttl)
        await opts.quota.move(owner, sessionItem(id), fileItem(file.code), size, file.expiresAt)
        prefixes.forget(id)
        opts.metrics.session('completed')
        return result
      } catch (err) {
        if (!(err instanceof DropcodeError && err.code === 'DROPCODE_DIGEST_MISMATCH')) {
          if (assembled) log.warn({ err, uploadId: maskSecret(id) }, 'completion failed after the chunks were assembled')
          await sessions.releaseCompletion(id, now(), token).catch(() => {})
        }
        throw err
      } finally {
        lease.stop()
      }
    }
  }

  const appends = createAppends({ blobs, sessions, prefixes, now, ttl, lockMs, keepLock, discard, complete: async (id, key) => await service.complete(id, key) })
  const concatenation = createConcatenation({
    blobs,
    sessions,
    files,
    quota: opts.quota,
    log,
    now,
    ttl,
    lockMs,
    keepCompletion,
    assemble,
    digest: async (blobKey, fromDriver, size) => await digestOf(blobKey, fromDriver, [], size, undefined),
    start: async (settings, key) => await service.start(settings, key)
  })
  return {
    ...service,
    /** Where a resumable upload stands (appends.ts). */
    progress: appends.progress,
    /** Appends to a resumable upload, completing it at its length (appends.ts). */
    append: (...args: Parameters<typeof appends.append>) => opts.inFlight.track(appends.append(...args)),

    /** Creates a final upload of partial ones and completes it (concatenation.ts). */
    concatenate: (...args: Parameters<typeof concatenation.concatenate>) => opts.inFlight.track(concatenation.concatenate(...args)),

    /**
     * Ends a resumable upload that has not completed (tus termination): its session, its storage
     * and its bytes in the key's quota go. An append under way then finds it gone and keeps nothing.
     */
    async terminate (id: string, key: ApiKey): Promise<void> {
      const view = await sessions.get(id, now())
      if (view === null || view.session.resumable === undefined || !ownedBy(view.session, key.name)) {
        throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND', 'No such upload in progress: it expired, was terminated, or completed (delete a completed file by its code).')
      }
      await sessions.remove(id)
      prefixes.forget(id)
      await opts.quota.drop(key.name, sessionItem(id))
      // What an append still under way writes after this is removed by the sweeper (the object
      // key stays in the cleanup index until the session's expiry).
      await blobs.purge(view.session.blobKey)
      opts.metrics.session('terminated')
    }
  }
}
