/**
 * The state layer, split by concern into five small stores. Each driver (lmdb/, redis/)
 * implements all four; test/state/*-contract.ts holds every driver to the same semantics.
 *
 * Rules shared by every method:
 * - Time is an argument (`now`, epoch ms), never read from a clock inside a driver, so the
 *   tests' clock governs expiry everywhere and the contract suites do not sleep.
 * - Each method is atomic with respect to every other caller on every instance sharing the
 *   store (one Lua script on Redis, one LMDB write transaction locally), and touches only the
 *   keys of one code, one session or one cleanup bucket (so Redis Cluster can run it).
 * - A backend that cannot be reached fails with DROPCODE_STATE_UNAVAILABLE (503); one that is
 *   out of space fails with DROPCODE_STORAGE_FULL (507).
 */
import type { ApiKeyRecord, ChunkRecord, Claim, FileRecord, KeyUsage, Lookup, Owner, SessionView, UploadSession } from '../core/model.js'

/** File records, download claims and the resume windows of claims. */
export interface FileStore {
  /**
   * Stores a new record unless its code is taken (by any record, live, exhausted or expired
   * but still retained). The record lives until `file.retainUntil`.
   * @returns false on a code collision (nothing written)
   */
  create (file: FileRecord, now: number): Promise<boolean>

  /** Reads a live file without claiming anything. */
  lookup (code: string, now: number): Promise<Lookup>

  /**
   * Takes one download if the file is live and below its limit, and records the claim
   * `claimId`, live until `until` (epoch ms, capped at the record's retention): a live claim
   * keeps the object while its download
   * streams, and afterwards for its resume window. A claim id that was refunded before it
   * arrived (see refund) takes nothing and answers `unknown`.
   */
  claim (code: string, claimId: string, now: number, until: number): Promise<Claim>

  /**
   * Resumes a live claim: its file, with the claim kept live until the record's retention while
   * the resumed download streams; null when the claim is unknown, ended or past its window.
   * Counts nothing.
   */
  resume (code: string, claimId: string, now: number): Promise<FileRecord | null>

  /**
   * Charges `bytes` to what live claim `claimId` has served (`claim` charges the file's size:
   * its first response sends the whole file), unless the total would exceed `limit` bytes.
   * Bounds what one claim (one ETag) can serve across its resumes.
   * @returns false (nothing charged) over the limit, or when the claim is not live
   */
  charge (code: string, claimId: string, bytes: number, limit: number, now: number): Promise<boolean>

  /**
   * A claim's download ended: with `keepUntil`, the claim stays resumable until then (a cut
   * download); without, it ends for good (every byte was sent). `unsent` bytes of what was
   * charged for this response were not sent and are taken off the claim's charge.
   * @returns until when the object is still needed (epoch ms; by the live file or live
   *   claims), or null when it can be deleted now
   */
  endClaim (code: string, claimId: string, now: number, keepUntil?: number, unsent?: number): Promise<number | null>

  /**
   * Undoes claim `claimId` at most once (the download was never served). Idempotent, and
   * safe when the claim's own outcome is unknown: a refund that arrives before its claim
   * leaves a tombstone, so the late claim takes nothing.
   */
  refund (code: string, claimId: string, now: number): Promise<void>

  /** Removes a live file (and its claims). @returns the removed record, or why there was none */
  delete (code: string, now: number): Promise<Lookup>

  /**
   * Until when the object `blobKey` is needed by the record under `code` (epoch ms): its
   * retention while the file is live, else the end of its latest live claim; null when the
   * record is gone, points elsewhere, or needs it no longer.
   */
  objectNeededUntil (code: string, blobKey: string, now: number): Promise<number | null>

  /**
   * Retracts a publish whose code was never answered: removes the record under `code` if it
   * points at `blobKey` (a record of another object is left alone). On Redis it also leaves a
   * tombstone until `until` (epoch ms) that makes a create of `code` sent earlier, but run later
   * (it waited in a paused server's socket), take nothing; a tombstone reads as unknown.
   */
  retract (code: string, blobKey: string, until: number, now: number): Promise<void>
}

/** One entry leased from the cleanup index. */
export interface DueObject {
  blobKey: string
  /** Whoever registered an interest in the object (file records, sessions). */
  owners: Owner[]
}

/**
 * The cleanup index: object keys with a deadline after which the sweeper may delete them,
 * unless an owner still needs them. Every object key enters it before its first byte is stored.
 */
export interface CleanupIndex {
  /** Sets (or moves) the deadline of `blobKey`, and adds `owner` to its owners. */
  schedule (blobKey: string, deadline: number, owner?: Owner): Promise<void>

  /**
   * Leases up to `limit` keys whose deadline ≤ now: their deadline moves to `leaseUntil`, so no
   * other sweeper takes them meanwhile (a crashed sweeper's lease runs out). A pending owner
   * (`p:CODE`) of a leased key becomes `x:CODE` in the same step: a publish still pending at its
   * deadline is given up, and its `confirm` fails.
   */
  lease (now: number, limit: number, leaseUntil: number): Promise<DueObject[]>

  /**
   * Undoes a lease whose answer was lost (it timed out, yet may have run or run later, when a
   * paused Redis wakes up): keys leased until exactly `leaseUntil` are due again at `now`.
   * Sent after the lease on the same connection, it runs after it.
   */
  release (leaseUntil: number, now: number): Promise<void>

  /** Drops a key (after its object is deleted). */
  forget (blobKey: string): Promise<void>

  /**
   * Ends a publish of `blobKey` under `code`: its pending owner (`p:CODE`) becomes the record's
   * owner (`f:CODE`) and the deadline moves to `deadline`, only if the pending owner is still
   * there. @returns false (nothing changed) when it is not: the publish was given up (`abandon`,
   * or a sweeper's lease), and its code must not be answered
   */
  confirm (blobKey: string, deadline: number, code: string): Promise<boolean>

  /**
   * Gives up a publish of `blobKey` under `code` (pending or confirmed, whatever reached the
   * store): its owner becomes `x:CODE` and the key is due at `now`, so the next sweep retracts
   * the record (if any) and deletes the object unless another owner needs it.
   */
  abandon (blobKey: string, code: string, now: number): Promise<void>

  /** Keys whose deadline ≤ now (sweeper lag). */
  countDue (now: number): Promise<number>
}

export type ChunkStart =
  | { ok: true, session: UploadSession }
  /** no live session (or another key's) */
  | { ok: false, reason: 'unknown' }
  /**
   * busy: completing; locked: another request holds this index. `until`: when the lease in the
   * way runs out unless its holder renews it (epoch ms), for the client's Retry-After.
   */
  | { ok: false, reason: 'busy' | 'locked', until: number }

export type ChunkCommit =
  | { ok: true, /** distinct chunks received */ received: number, /** the replaced record */ previous: ChunkRecord | null, /** bytes of all chunks */ bytes: number }
  /** gone: the session expired or completed; lost: this request's lock was taken over */
  | { ok: false, reason: 'gone' | 'lost' }

export type CompletionStart =
  | { status: 'open', session: UploadSession, chunks: Map<number, ChunkRecord> }
  | { status: 'done', result: CompletedFile }
  | { status: 'unknown' }
  /** Another completer's lease, or a chunk's lock, is in the way until `until` (epoch ms) unless renewed. */
  | { status: 'busy', until: number }

/** What a completed session produced, answered again to repeated completes. */
export interface CompletedFile {
  code: string
  /** Bytes. */
  size: number
  /** Hex. */
  sha256: string
}

/**
 * A completed session as /upload/verify still describes it, for as long as repeated completes
 * answer its result (the same record answers both). Its storage handles are gone, and its chunk
 * records keep only what verify shows (no receipts: the parts were consumed by assembling).
 */
export interface CompletedSession {
  session: Pick<UploadSession, 'id' | 'filename' | 'totalChunks' | 'maxDownloads' | 'expiryHours' | 'keyId'>
  /** The chunks the file was assembled from, by index. */
  chunks: Map<number, Pick<ChunkRecord, 'size' | 'sha256'>>
  result: CompletedFile
}

/**
 * Chunked upload sessions and their chunk records.
 *
 * A session belongs to the key that opened it (`session.keyId`): methods that take a `keyId`
 * answer a session of another key exactly as an unknown one, and change nothing. Each key has
 * a bounded number of places for open sessions (`reserve`); a session holds its place until it
 * is finished, removed or idle past its expiry.
 */
export interface SessionRecords {
  /**
   * Takes one of `max` places for open sessions of `keyId`, for session `id`, until `until`
   * (its idle expiry; the session's own refreshes move it). Places of sessions that are gone or
   * idle past their expiry are free. On the embedded driver a place also counts toward
   * LOCAL_STATE_MAX_RECORDS (DROPCODE_STATE_FULL beyond).
   * @returns false (nothing taken) when all `max` places are taken
   */
  reserve (keyId: string, id: string, until: number, now: number, max: number): Promise<boolean>

  /** Frees the place of a session that was never created (its start failed). */
  release (keyId: string, id: string): Promise<void>

  /** Stores a new session (its place reserved first), alive until `now + ttlMs` unless refreshed. */
  create (session: UploadSession, now: number, ttlMs: number): Promise<void>

  /** A live session and its chunks, or null. Ownership is the caller's to check (`ownedBy`). */
  get (id: string, now: number): Promise<SessionView | null>

  /** Sets the session's layout unless one is set (`wanted` undefined: only reads it). */
  settleLayout (id: string, wanted: string | undefined, now: number): Promise<string | undefined>

  /**
   * Ends a completed session (freeing its place); repeated completes answer `result`, and
   * `completed` describes the session with its chunks, until `now + doneTtlMs`. A repeated
   * finish (the session already gone) keeps the first one's description and key.
   */
  finish (id: string, result: CompletedFile, now: number, doneTtlMs: number): Promise<void>

  /**
   * A finished session within its done window, or null: also for one finished by a version
   * that kept only its result (its repeated completes still answer it). Ownership is the
   * caller's to check (`ownedBy`).
   */
  completed (id: string, now: number): Promise<CompletedSession | null>

  /** Removes a session whose completion failed for good (its storage is already gone), freeing its place. */
  remove (id: string): Promise<void>

  /** Until when a live session needs its object (its idle expiry), or null. */
  objectNeededUntil (id: string, now: number): Promise<number | null>

}

/**
 * The leases on a session: a chunk index's upload lock while a request streams it, and the
 * completion lease of the one request that completes it. Each step that takes, renews or gives up
 * a lease also reads or writes the session's records in the same atomic step (a chunk is recorded
 * only while its lock is still held; completion starts only with no chunk locked and reads the
 * chunks it assembles), so one driver object implements both ports over the same keys.
 */
export interface SessionLeases {
  /**
   * Takes the upload lock of chunk `index` for `token` until `lockUntil` and refreshes the
   * session's TTL. Fails while the session completes or another live lock holds the index;
   * `unknown` for a session of another key than `keyId`.
   */
  beginChunk (id: string, index: number, token: string, lockUntil: number, now: number, ttlMs: number, keyId: string): Promise<ChunkStart>

  /** Extends a lock held by `token` (heartbeat). @returns false when the lock is no longer held */
  extendChunk (id: string, index: number, token: string, lockUntil: number, now: number): Promise<boolean>

  /**
   * Releases `token`'s lock after a failed upload and forgets any earlier record of the index
   * (the failed attempt may have overwritten its data), so verify lists it as missing.
   * @returns the forgotten record, for the caller to discard
   */
  abortChunk (id: string, index: number, token: string, now: number): Promise<ChunkRecord | null>

  /** Records chunk `index` (replacing an earlier record) if `token` still holds its lock, and releases the lock. */
  commitChunk (id: string, index: number, token: string, chunk: ChunkRecord, now: number, ttlMs: number): Promise<ChunkCommit>

  /**
   * Starts completing, atomically: one caller (`token`) gets `open` (with the chunks) until it
   * finishes, releases, or its lease (`leaseUntil`, renewed by `extendCompletion`) runs out; no
   * chunk may start meanwhile. The session's idle expiry moves to at least `leaseUntil + ttlMs`
   * (idle counts from the lease's end), so it cannot expire under a completion, nor before
   * another can take over a dead one. A session (or a finished one's result)
   * of another key than `keyId` is `unknown`.
   */
  beginCompletion (id: string, now: number, leaseUntil: number, keyId: string, token: string, ttlMs: number): Promise<CompletionStart>

  /**
   * Renews `token`'s completion lease to `leaseUntil` (heartbeat), moving the idle expiry as
   * beginCompletion does. @returns false when the lease is no longer `token`'s (or ran out)
   */
  extendCompletion (id: string, token: string, leaseUntil: number, now: number, ttlMs: number): Promise<boolean>

  /** Gives up `token`'s completion (the session stays open); another holder's is left alone. */
  releaseCompletion (id: string, now: number, token: string): Promise<void>
}

/** A driver's sessions: their records and their leases (one object: see SessionLeases). */
export interface SessionStore extends SessionRecords, SessionLeases {}

/** Fixed-window counters (rate limits), the shape of @fastify/rate-limit's stores. */
export interface CounterStore {
  /** Adds one; a window starts with its first hit and lasts `windowMs`. */
  incr (key: string, windowMs: number, now: number): Promise<{ count: number, resetMs: number }>
  /** Reads without adding (0 when absent or over). */
  read (key: string, now: number): Promise<{ count: number, resetMs: number }>
}

/**
 * One change to a key's ledger: the bytes the key holds, as items (a live file `f:CODE`, an open
 * session's received chunks `s:ID`, an upload in flight `u:ID`), each with its bytes and the end
 * of its life (epoch ms; an item whose end has passed holds nothing: a file's expiry, a session's
 * idle expiry, a crashed upload's timeout).
 */
export interface LedgerChange {
  /** Items removed first (their bytes returned). */
  drop?: string[]
  /** Adds `bytes` (may be negative) to `item`, creating it, and sets its end to `until`. */
  add?: { item: string, bytes: number, until: number }
  /**
   * With `add`: refuse (change nothing) when the key's bytes would exceed `quota`; with `upTo`,
   * take as much of `bytes` as fits instead (refusing only when nothing fits).
   */
  quota?: number
  upTo?: boolean
}

/**
 * API keys as data, and each key's ledger of stored bytes (its quota). Keys are few and written
 * rarely (by the keys API); `find` is read on every authenticated request (services/keys.ts
 * caches it briefly). The ledger is per key name and works for names the store has no record of
 * (keys from API_KEYS).
 */
export interface KeyStore {
  /** Stores a new key. @returns false (nothing written) when its name, or one of its secrets' hashes, is taken */
  create (key: ApiKeyRecord, now: number): Promise<boolean>

  /**
   * The key that the secret with hex SHA-256 `hash` opens at `now`: its record, when the hash is
   * one of its secrets whose end has not passed and the key has not expired; else null.
   */
  find (hash: string, now: number): Promise<ApiKeyRecord | null>

  /** A key by name (expired or not), or null. */
  get (name: string): Promise<ApiKeyRecord | null>

  /** Every key, by name. */
  list (): Promise<ApiKeyRecord[]>

  /**
   * Adds secret `hash` to key `name` (no end) and ends each other secret at `oldUntil` (or its
   * own earlier end); secrets already ended are forgotten. @returns the new record, or null when
   * there is no such key (or `hash` is taken)
   */
  rotate (name: string, hash: string, oldUntil: number, now: number): Promise<ApiKeyRecord | null>

  /** Removes key `name` and its secrets: refused from now on. Its ledger stays. @returns false when there was none */
  revoke (name: string): Promise<boolean>

  /**
   * Applies `change` to key `name`'s ledger, atomically against every other change of that
   * name on every instance. Items whose end has passed are dropped first.
   * @returns ok false when refused (nothing changed); `added`: bytes added to the item (less than
   *   asked with `upTo`); `used`: the key's bytes afterwards
   */
  account (name: string, change: LedgerChange, now: number): Promise<{ ok: boolean, added: number, used: number }>

  /** What key `name` holds at `now`, and when it last started an upload (an `account` with `quota`). */
  usage (name: string, now: number): Promise<KeyUsage>
}

/** A state driver: the five stores over one backend. */
export interface StateBackend {
  files: FileStore
  cleanup: CleanupIndex
  sessions: SessionStore
  counters: CounterStore
  keys: KeyStore
  /** Throws when the backend cannot be used (readiness). */
  ping (): Promise<void>
  /** Closes what the driver opened. */
  close (): Promise<void>
}

export type { ApiKeyRecord, ChunkRecord, Claim, FileRecord, KeyUsage, Lookup, Owner, SessionView, UploadSession }
