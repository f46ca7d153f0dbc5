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

  /** Throws when the store cannot be used (readiness). */
  ping (): Promise<void>

  close (): Promise<void>
}
