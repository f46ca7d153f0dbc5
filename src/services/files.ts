/**
 * The file lifecycle, independent of HTTP: receive bytes into a new object, publish them under
 * a fresh code, serve downloads against the limit, delete. Takes its stores as arguments; the
 * routes only parse and map results.
 *
 * Ordering rules that keep storage and state consistent without multi-key transactions:
 * - An object key enters the cleanup index (deadline: now + UPLOAD_TIMEOUT) *before* any byte
 *   is written, so a crash mid-upload leaves something the sweeper finds.
 * - Publishing a code is three steps: the code is registered as the object's pending owner
 *   (`p:CODE`, deadline now + PUBLISH_WINDOW_MS), the record is created, and `confirm` turns the
 *   pending owner into the record's (`f:CODE`, deadline the record's retention); only then is the
 *   code answered. A publish that fails after its first step is `abandon`ed (`x:CODE`, due now),
 *   never deleted outright: its create may have run, or may run later (it waited in a paused
 *   Redis's socket, so a 503 says nothing about it). The sweeper retracts the record (if any,
 *   with a tombstone against a create that runs even later) before it deletes the object, so a
 *   record never points at a deleted object. A sweeper that leases a publish still pending at
 *   its deadline (its instance crashed, say) gives it up the same way, and `confirm` then fails:
 *   a code is answered only if its publish was confirmed, and retracted only if it was not.
 * - A download is claimed (with a fresh claim id) before the object is opened; if the object
 *   cannot be opened the claim is refunded, so a storage fault never eats a download. A claim
 *   that fails with a state error may still have run (or run later, when a paused Redis
 *   resumes): its id is queued for refund (refunds.ts), so a 503 never eats a download either.
 * - When a claim ends, its record says whether anyone still needs the object; if not, it is
 *   deleted now, else its deadline moves to when the need ends. The sweeper asks the owners
 *   again before it deletes anything.
 * - A claim is one download, however often it resumes: each response is charged to the claim
 *   before it is served (the first with the whole file), and what did not go out is taken off
 *   when it ends. A resume that would take the claim past its budget (`claimBudget`) is refused
 *   and the request is answered as if the claim had ended: a new download if any are left, or 404.
 */
import { pipeline, type Readable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { BlobNotFoundError, type BlobStore, type UploadTicket } from '../blob/index.js'
import { resolveRange, type ByteRange, type RangeSpec } from '../core/byte-range.js'
import { DropcodeError, withoutStack } from '../core/errors.js'
import { cleanFilename, contentTypeFor, multipartFilename } from '../core/filename.js'
import { isCode, newBlobKey, newClaimId, newCode } from '../core/ids.js'
import { pendingOwner, type Claim, type FileRecord, type Unavailable } from '../core/model.js'
import { ByteCounter, Sha256Meter } from '../core/streams.js'
import type { Metrics } from '../metrics.js'
import type { CleanupIndex, FileStore } from '../state/index.js'
import type { InFlight } from './in-flight.js'
import { overLimit, whose } from './keys.js'
import { checkDigest, type Pending } from './pending.js'
import { fileItem, type Hold, type Quota } from './quota.js'
import type { RefundQueue } from './refunds.js'

const HOUR = 3_600_000
const CODE_ATTEMPTS = 8
/**
 * ms a publish may take from registering its code to confirming it before a sweeper gives it up
 * (then it answers 503). Each step is one state command bounded by the Redis command timeout
 * (5 s); a crashed instance's publish is resolved one sweep after this.
 */
export const PUBLISH_WINDOW_MS = 60_000
/**
 * Bytes one claim may serve beyond its file's size, for bytes lost in flight when a download is
 * cut (sent by us, never received: socket buffers on both ends, a few MiB per cut). Capped at the
 * file's size, so a leaked ETag of a small file yields at most one more copy.
 */
export const CLAIM_ALLOWANCE = 64 * 1024 * 1024
/** What one claim may serve across all its responses (bytes): its file's size plus the allowance. */
export const claimBudget = (size: number) => size + Math.min(size, CLAIM_ALLOWANCE)

export interface StoredBlob {
  key: string
  /** Bytes. */
  size: number
  /** SHA-256 of the stored bytes, hex. */
  sha256: string
  filename: string
}

/** What a published file's record takes from its upload's fields, and the key that uploaded it. */
export interface PublishSettings { maxDownloads: number, expiryHours: number, keyName?: string | undefined }

/** How an upload's body is received. */
export interface UploadLimits {
  /** An upper bound of its length if known (the request's Content-Length). */
  maxLength?: number | undefined
  /** Its admission at the store's gate (`BlobStore.admit`), if any. */
  ticket?: UploadTicket | undefined
  /** Its room in its key's quota (quota.ts): its size limit, and where its bytes are counted. */
  hold?: Hold | undefined
}

/** An upload stored under `blobKey`, published by `commit` (pending.ts). */
export interface PendingFile extends Pending<FileRecord, PublishSettings> {
  readonly blobKey: string
}

export interface Download {
  file: FileRecord
  /** The claim this download belongs to (its ETag); a resume keeps the claim's id. */
  claimId: string
  /** The bytes sent (206), or undefined for the whole file (200). */
  range: ByteRange | undefined
  /** True when this continues an earlier claim (counted nothing). */
  resumed: boolean
  body: Readable
  /**
   * Call once the response is over; `complete` when every byte went out. A claim whose last
   * byte was sent ends (and the object is deleted when nobody needs it any more); a claim cut
   * short stays resumable for DOWNLOAD_RESUME_SECONDS.
   */
  finish (complete: boolean): void
}

/**
 * What a download asks for: a new claim (nothing), or to go on with a claim it holds, for the
 * bytes of `range` (the whole file when undefined).
 */
export interface DownloadRequest {
  resume?: { claimId: string, range: RangeSpec | undefined } | undefined
}

/** A valid claim's range that lies past the end of the file (416). */
export class RangeNotSatisfiable extends DropcodeError {
  constructor (readonly size: number) { super('DROPCODE_RANGE_NOT_SATISFIABLE') }
}

export interface FileServiceOptions {
  blobs: BlobStore
  files: FileStore
  cleanup: CleanupIndex
  log: FastifyBaseLogger
  metrics: Metrics
  /** Uploads and object deletions are tracked so a shutdown waits for their cleanup. */
  inFlight: InFlight
  /** Where refunds go that the state store did not acknowledge at once. */
  refunds: RefundQueue
  /** Keys' ledgers: a file's bytes return to its key when it is deleted or downloaded for the last time. */
  quota: Quota
  /** Epoch ms. */
  now: () => number
  /** Bytes. */
  maxFileSize: number
  /** ms an object outlives its record's expiry. */
  graceMs: number
  /** ms after which an unfinished upload counts as abandoned. */
  uploadTimeoutMs: number
  /** ms a cut download stays resumable (its object is kept for it meanwhile). */
  resumeMs: number
}

/** The size limit of a stream under `hold`: the key's file limit, or what is left of its quota. */
export function sizeLimit (hold: Hold, what: 'file' | 'chunk' = 'file'): { max: number, error: () => DropcodeError } {
  const { key, max } = hold
  return {
    max,
    error: () => hold.over === 'quota'
      ? overLimit(key, 'quotaBytes', 'DROPCODE_QUOTA_EXCEEDED', `The upload is larger than what is left of ${whose(key, 'quotaBytes')}'s quota (${max} bytes); nothing was stored. Delete files or let them expire first.`)
      : what === 'chunk'
        ? new DropcodeError('DROPCODE_CHUNK_TOO_LARGE', `The chunk is larger than the limit of ${max} bytes.`)
        : overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The file is larger than ${whose(key, 'maxFileSize')}'s limit of ${max} bytes.`)
  }
}

export class FileNotFound extends DropcodeError {
  constructor (readonly reason: Unavailable) { super('DROPCODE_FILE_NOT_FOUND') }

  /** An unknown, expired, used-up or deleted code is no failure: its error has no stack. */
  static of (reason: Unavailable): FileNotFound { return withoutStack(() => new FileNotFound(reason)) }
}

export type FileService = ReturnType<typeof createFileService>

export function createFileService (opts: FileServiceOptions) {
  const { blobs, files, cleanup, log, metrics, now } = opts
  const notFound = (reason: Unavailable) => {
    metrics.downloadRefused(reason)
    return FileNotFound.of(reason)
  }

  /** Deletes an object and its index entry; on failure makes it due now, for the sweeper. */
  function dropBlob (key: string): Promise<void> {
    return opts.inFlight.track((async () => {
      try {
        await blobs.delete(key)
        await cleanup.forget(key)
      } catch (err) {
        log.warn({ err, blobKey: key }, 'could not delete object now; the sweeper will retry')
        await cleanup.schedule(key, now()).catch(() => {}) // else it waits for its old deadline
      }
    })())
  }

  /**
   * A publish failed after registering `code`: nobody is told the code. Give it up (a late
   * confirm then fails), then retract the record and delete the object; a step the store does not
   * acknowledge is left to the sweeper, which does the same one sweep after the store answers.
   */
  async function abandonPublish (blobKey: string, code: string, retainUntil: number) {
    log.warn({ blobKey }, 'publish failed; its code is never answered, and its record (if any) is retracted before its object goes')
    try {
      await cleanup.abandon(blobKey, code, now())
      await files.retract(code, blobKey, retainUntil, now())
    } catch (err) {
      log.warn({ err, blobKey }, 'could not retract a failed publish now; the sweeper will')
      return
    }
    await dropBlob(blobKey)
  }

  /** After a claim ended: delete the object if nobody needs it, else keep it until then. */
  async function afterClaim (file: FileRecord, neededUntil: number | null) {
    if (neededUntil === null) await dropBlob(file.blobKey)
    else if (neededUntil < file.retainUntil) await cleanup.schedule(file.blobKey, neededUntil)
  }

  /** Streams an upload into a new object (in the cleanup index before its first byte), hashing it. */
  async function store (body: Readable, rawFilename: string | undefined, { maxLength, ticket, hold }: UploadLimits): Promise<StoredBlob> {
    const key = newBlobKey()
    try {
      await cleanup.schedule(key, now() + opts.uploadTimeoutMs)
    } catch (err) {
      body.resume() // let the parser finish reading the request
      throw err
    }
    const meter = new Sha256Meter(hold !== undefined ? sizeLimit(hold) : { max: opts.maxFileSize, code: 'DROPCODE_FILE_TOO_LARGE' })
    pipeline(body, meter, () => {})
    try {
      const { size } = await blobs.put(key, meter, { contentType: 'application/octet-stream', maxLength, ticket })
      return { key, size, sha256: meter.hex(), filename: cleanFilename(multipartFilename(rawFilename)) }
    } catch (err) {
      body.destroy()
      await dropBlob(key)
      throw err
    }
  }

  /** Registers a stored object under a fresh code; deletes the object if that fails. */
  async function publish (blob: StoredBlob, settings: PublishSettings, kind: 'single' | 'chunked' = 'single'): Promise<FileRecord> {
    const createdAt = now()
    const expiresAt = createdAt + settings.expiryHours * HOUR
    let drawn: FileRecord | undefined
    try {
      for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
        const file: FileRecord = drawn = {
          code: newCode(),
          blobKey: blob.key,
          filename: blob.filename,
          contentType: contentTypeFor(blob.filename),
          size: blob.size,
          sha256: blob.sha256,
          maxDownloads: settings.maxDownloads,
          downloads: 0,
          createdAt,
          expiresAt,
          retainUntil: expiresAt + opts.graceMs,
          ...(settings.keyName !== undefined ? { keyName: settings.keyName } : {})
        }
        await cleanup.schedule(blob.key, now() + PUBLISH_WINDOW_MS, pendingOwner(file.code))
        if (await files.create(file, createdAt)) {
          if (!await cleanup.confirm(blob.key, file.retainUntil, file.code)) {
            throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: new Error('publish given up by a sweeper before it was confirmed') })
          }
          metrics.uploaded(kind, file.size, file.keyName)
          return file
        }
        // A collision wrote nothing; the pending owner it left is given up with the key.
        log.warn({ attempt }, 'download code collision; drawing another')
      }
      throw new DropcodeError('DROPCODE_INTERNAL', undefined, undefined, { cause: new Error('no free download code after several draws') })
    } catch (err) {
      if (drawn === undefined) await dropBlob(blob.key)
      else await abandonPublish(blob.key, drawn.code, drawn.retainUntil)
      throw err
    }
  }

  /** Stores an upload's bytes, pending until the route has read the rest of its form. */
  async function receive (body: Readable, rawFilename: string | undefined, limits: UploadLimits): Promise<PendingFile> {
    const { hold } = limits
    const blob = await store(body, rawFilename, limits).catch(async (err: unknown) => {
      await hold?.release()
      throw err
    })
    let settled = false
    const pending: PendingFile = {
      blobKey: blob.key,
      sha256: blob.sha256,
      size: blob.size,
      async abort () {
        if (settled) return
        settled = true
        await dropBlob(blob.key)
        await hold?.release()
      },
      async commit ({ sha256, ...settings }) {
        await checkDigest(pending, sha256)
        settled = true // a failed publish gives up its object itself
        const file = await publish(blob, { ...settings, keyName: hold?.key.name }).catch(async (err: unknown) => {
          await hold?.release()
          throw err
        })
        await hold?.keep(fileItem(file.code), file.size, file.expiresAt)
        return file
      }
    }
    return pending
  }

  /** The claim's window after a cut: resumable until then (never past the record's retention). */
  const keepUntil = (file: FileRecord) => opts.resumeMs > 0 ? Math.min(now() + opts.resumeMs, file.retainUntil) : undefined
  /** `unsent`: bytes charged for the response that did not go out (taken off the claim's charge). */
  const endClaim = (file: FileRecord, claimId: string, over: boolean, unsent = 0) =>
    files.endClaim(file.code, claimId, now(), over ? undefined : keepUntil(file), unsent)
      .then(needed => afterClaim(file, needed))
      .catch(err => log.warn({ err }, 'could not end a download claim; the sweeper will remove the object'))

  /**
   * Opens the object for a claim (new or resumed) and wires its end; null when a resume would
   * take the claim past its budget (the claim is left as it was, resumable for what remains).
   */
  async function open (file: FileRecord, claimId: string, resumed: boolean, spec?: RangeSpec): Promise<Download | null> {
    const asked = spec !== undefined ? resolveRange(spec, file.size) : undefined
    if (asked === 'unsatisfiable') {
      await endClaim(file, claimId, false)
      throw new RangeNotSatisfiable(file.size)
    }
    const range: ByteRange | undefined = asked
    // Charged before the first byte (a new claim was charged the whole file when taken).
    const length = range === undefined ? file.size : range.end - range.start + 1
    if (resumed) {
      const charged = await files.charge(file.code, claimId, length, claimBudget(file.size), now()).catch(async err => {
        await endClaim(file, claimId, false)
        throw err
      })
      if (!charged) {
        await endClaim(file, claimId, false)
        return null
      }
    }
    let body: Readable
    try {
      ({ body } = await blobs.get(file.blobKey, range))
    } catch (err) {
      if (err instanceof BlobNotFoundError) {
        log.error({ blobKey: file.blobKey }, 'file record points at a missing object')
        throw notFound('unknown')
      }
      if (resumed) await endClaim(file, claimId, false, length)
      else await files.refund(file.code, claimId, now()).catch(() => opts.refunds.add(file.code, claimId))
      throw err
    }
    if (resumed) metrics.downloadResumed()
    const counter = new ByteCounter()
    pipeline(body, counter, () => {})
    let finished = false
    return {
      file,
      claimId,
      range,
      resumed,
      body: counter,
      finish (complete) {
        if (finished) return
        finished = true
        counter.destroy() // stops reading storage if the client went away
        metrics.downloadEnded(counter.bytes, complete)
        // Over when the file's last byte went out; a range that stops short keeps the claim.
        endClaim(file, claimId, complete && (range === undefined || range.end === file.size - 1), Math.max(length - counter.bytes, 0)).catch(() => {})
      }
    }
  }

  return {
    /**
     * Waits for the storage's permission to read an upload of at most `maxLength` bytes (S3: upload
     * memory, parts.ts; undefined when the storage has no gate). Pass the ticket to `receive`
     * (or the session's chunk) and `release()` it once the body is read.
     */
    admit: opts.blobs.admit?.bind(opts.blobs),

    /**
     * Streams an upload body into a new object, enforcing MAX_FILE_SIZE and hashing it; the
     * route then commits it (checked against a declared SHA-256, published under a fresh code)
     * or aborts it. `maxLength`: an upper bound of its length if known (the request's
     * Content-Length); `ticket`: the upload's admission at the store's gate (`BlobStore.admit`),
     * if any.
     */
    receive (body: Readable, rawFilename: string | undefined, limits: UploadLimits = {}): Promise<PendingFile> {
      return opts.inFlight.track(receive(body, rawFilename, limits))
    },

    /** Deletes a stored object that will not be published (a session whose digest differs). */
    discard: (blob: StoredBlob) => dropBlob(blob.key),

    publish,

    /** A live file, without claiming a download (HEAD). */
    async lookup (code: string): Promise<FileRecord> {
      if (!isCode(code)) throw notFound('unknown') // before any store sees it
      const found = await files.lookup(code, now())
      if (!found.ok) throw notFound(found.reason)
      return found.file
    },

    /**
     * Serves a download: `resume` naming a live claim of this file goes on with that claim (its
     * range, counting nothing, on any instance) within the claim's budget; anything else claims
     * a new download (the whole file), so a range can never read a file around its limit.
     */
    async download (code: string, req: DownloadRequest = {}): Promise<Download> {
      if (!isCode(code)) throw notFound('unknown') // before any store sees it
      const { resume } = req
      if (resume !== undefined) {
        const file = await files.resume(code, resume.claimId, now())
        const resumed = file !== null ? await open(file, resume.claimId, true, resume.range) : null
        if (resumed !== null) return resumed
      }
      const claimId = newClaimId()
      // Live while it streams (it keeps the object); the store caps it at the record's retention.
      let claim: Claim
      try {
        claim = await files.claim(code, claimId, now(), Number.MAX_SAFE_INTEGER)
      } catch (err) {
        // Outcome unknown: the claim may have been taken (or be taken once the store answers
        // again) while this request fails. Refund its id, which also stops a late claim.
        if (err instanceof DropcodeError && err.code === 'DROPCODE_STATE_UNAVAILABLE') opts.refunds.add(code, claimId)
        throw err
      }
      if (!claim.ok) throw notFound(claim.reason)
      // Its last download taken, the file is no longer live: its bytes return to its key.
      if (claim.last) await opts.quota.fileGone(claim.file)
      return (await open(claim.file, claimId, false))!
    },

    /** Deletes a live file: record first (atomically), then its object. */
    async remove (code: string): Promise<void> {
      if (!isCode(code)) throw FileNotFound.of('unknown') // before any store sees it
      const removed = await files.delete(code, now())
      if (!removed.ok) throw FileNotFound.of(removed.reason) // not a download refusal
      await opts.quota.fileGone(removed.file)
      await dropBlob(removed.file.blobKey)
    }
  }
}
