/**
 * StateStore: the records that make a stored object a downloadable file, and the cleanup index.
 *
 * Semantics every driver must hold (test/state/contract.ts checks them against each driver):
 * - A file record lives under its code until `expiresAt` (epoch ms). It is written together
 *   with its expiry, so an expired record is never served, even before it is physically gone.
 * - `claimDownload` is atomic across every instance sharing the store: with maxDownloads = N,
 *   exactly N claims succeed however many arrive at once. The record of an exhausted file
 *   stays until its expiry (so its code is not handed out again while links to it circulate).
 * - The cleanup index maps object keys to a deadline (epoch ms) after which the object may be
 *   deleted. Sweepers on several instances lease due keys, so each key is worked on by one
 *   sweeper at a time; a crashed sweeper's lease simply runs out.
 */

export interface FileRecord {
  /** The 6-character download code. */
  code: string
  /** Object key in the BlobStore. */
  blobKey: string
  /** Base name given at upload, shown in Content-Disposition. */
  filename: string
  /** Content type served on download (already checked against the safe list). */
  contentType: string
  /** Bytes. */
  size: number
  maxDownloads: number
  /** Downloads claimed so far. */
  downloads: number
  /** Epoch ms. */
  createdAt: number
  /** Epoch ms; the file is gone from this moment. */
  expiresAt: number
}

export type Unavailable = 'unknown' | 'expired' | 'exhausted'

export type Lookup =
  | { ok: true, file: FileRecord }
  | { ok: false, reason: Unavailable }

export type Claim =
  | { ok: true, file: FileRecord, /** This claim took the last permitted download. */ last: boolean }
  | { ok: false, reason: Unavailable }

/** A chunked upload session (POST /upload/start … /upload/complete). */
export interface UploadSession {
  /** upload_id: 128 random bits, base64url (22 characters). */
  id: string
  /** Object key the file will be stored under. */
  blobKey: string
  /** BlobStore handle for the chunked upload (the S3 UploadId; '' for fs). */
  handle: string
  filename: string
  totalChunks: number
  maxDownloads: number
  expiryHours: number
  /** Epoch ms. */
  createdAt: number
  /** How chunks are laid out in storage, settled by the first chunk that decides it (BlobStore-specific). */
  layout?: string
}

export interface SessionView {
  session: UploadSession
  /** Indexes received so far, ascending. */
  received: number[]
}

export type ChunkStart =
  | { ok: true, session: UploadSession }
  /** unknown: no such (live) session; busy: completing; locked: this index is being uploaded by another request */
  | { ok: false, reason: 'unknown' | 'busy' | 'locked' }

export type CompletionStart =
  | { status: 'open', session: UploadSession, /** index → receipt */ receipts: Map<number, string> }
  | { status: 'done', code: string }
  | { status: 'unknown' }
  | { status: 'busy' }

export interface SessionTiming {
  /** Epoch ms. */
  now: number
  /** ms an idle session lives; refreshed by every chunk. */
  ttlMs: number
  /** Epoch ms after which the session's object may be swept (refreshed with the TTL). */
  blobDeadline: number
}

export interface StateStore {
  /**
   * Stores a new file unless its code is taken (by any record, live or exhausted), and in the
   * same step sets its object's cleanup deadline to `blobDeadline` (epoch ms).
   * @returns false on a code collision (nothing written)
   */
  createFile (file: FileRecord, blobDeadline: number): Promise<boolean>

  /** Reads a file without claiming a download. `now` is epoch ms. */
  lookupFile (code: string, now: number): Promise<Lookup>

  /** Atomically takes one download if the file is live and below its limit. */
  claimDownload (code: string, now: number): Promise<Claim>

  /** Gives back a claimed download that was never served (the object could not be opened). */
  refundDownload (code: string): Promise<void>

  /**
   * Removes a live file and, in the same step, makes its object due for cleanup now.
   * @returns the removed record, or why there was none
   */
  deleteFile (code: string, now: number): Promise<Lookup>

  /** Sets (or moves) the cleanup deadline of an object key, epoch ms. */
  scheduleBlobCleanup (blobKey: string, deadline: number): Promise<void>

  /**
   * Leases up to `limit` object keys whose deadline has passed: their deadline moves to
   * `leaseUntil`, so no other sweeper takes them meanwhile.
   */
  leaseDueBlobs (now: number, limit: number, leaseUntil: number): Promise<string[]>

  /** Drops an object key from the cleanup index (after the object is deleted). */
  forgetBlob (blobKey: string): Promise<void>

  /** Number of keys in the cleanup index whose deadline is ≤ now (sweeper lag). */
  countDueBlobs (now: number): Promise<number>

  /** Stores a new session (idle TTL `ttlMs`) and sets its object's cleanup deadline. */
  createSession (session: UploadSession, timing: SessionTiming): Promise<void>

  /** A live session and the chunk indexes it holds, or null. */
  getSession (id: string): Promise<SessionView | null>

  /**
   * Takes the upload lock of chunk `index` until `lockUntil` (epoch ms) and refreshes the
   * session's TTL. Fails while the session completes or another request holds the index.
   */
  beginChunk (id: string, index: number, lockUntil: number, timing: SessionTiming): Promise<ChunkStart>

  /** Extends a held chunk lock (heartbeat of a long chunk upload). */
  extendChunkLock (id: string, index: number, lockUntil: number): Promise<void>

  /**
   * Releases a chunk lock after a failed upload and forgets any earlier receipt of the index
   * (a failed retry may have overwritten its data), so the index counts as missing again.
   * @returns the forgotten receipt, for the caller to discard
   */
  abortChunk (id: string, index: number): Promise<string | null>

  /**
   * Records chunk `index` (replacing an earlier receipt) and releases its lock. Receipts are
   * JSON with a numeric `size` (bytes), summed per session.
   * @returns distinct chunks received, the replaced receipt, and the session's total bytes; or
   *   null when the session is gone (expired or completed meanwhile)
   */
  commitChunk (id: string, index: number, receipt: string, timing: SessionTiming): Promise<{ received: number, previous: string | null, bytes: number } | null>

  /** Sets the session's layout unless one is set (`wanted` undefined: only reads it). */
  settleLayout (id: string, wanted: string | undefined): Promise<string | undefined>

  /**
   * Starts completing a session, atomically: only one caller gets `open` (with the receipts)
   * until it finishes, releases, or its lease (`leaseUntil`, epoch ms) runs out.
   */
  beginCompletion (id: string, now: number, leaseUntil: number): Promise<CompletionStart>

  /** Gives up a completion begun with beginCompletion (the session stays open). */
  releaseCompletion (id: string): Promise<void>

  /** Ends a completed session; repeated completes answer `code` for `doneTtlMs`. */
  finishSession (id: string, code: string, doneTtlMs: number): Promise<void>

  /**
   * Adds one to a fixed-window counter (rate limits). The window starts with the first hit
   * and lasts `windowMs`.
   * @returns the count in the current window and ms until it resets
   */
  hitCounter (key: string, windowMs: number): Promise<{ count: number, resetMs: number }>

  /** Reads a counter without adding to it (0 when absent or expired). */
  peekCounter (key: string): Promise<{ count: number, resetMs: number }>

  /** Throws when the store cannot be used (readiness). */
  ping (): Promise<void>

  close (): Promise<void>
}
