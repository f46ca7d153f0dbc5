/**
 * The domain model shared by every layer: stored files, their claims, chunked upload sessions.
 * Plain data only; the state drivers store it, the services give it meaning.
 */

/** A stored, downloadable file (the interface's "stored file"). */
export interface FileRecord {
  /** The 6-character download code. */
  code: string
  /** Object key in the BlobStore (32 hex digits, never derived from the code or name). */
  blobKey: string
  /** Base name given at upload, shown in Content-Disposition. */
  filename: string
  /** Content type served on download (already checked against the safe list). */
  contentType: string
  /** Bytes. */
  size: number
  /** SHA-256 of the stored bytes, computed by the service, lowercase hex. */
  sha256: string
  maxDownloads: number
  /** Downloads claimed so far (refunds subtract). */
  downloads: number
  /** Epoch ms. */
  createdAt: number
  /** Epoch ms; no new download may be claimed from this moment. */
  expiresAt: number
  /**
   * Epoch ms until which the record (and so its object and claims) is kept: expiry plus
   * SWEEP_GRACE_SECONDS. The code stays taken until then.
   */
  retainUntil: number
  /** The name of the API key that uploaded it (absent for files stored before keys had names). */
  keyName?: string
}

/** Why a code does not lead to a live file. */
export type Unavailable = 'unknown' | 'expired' | 'exhausted'

/**
 * How a request ended (its log line, the request histogram): its response was delivered; the
 * client went away first; or the server cut the connection (stall or minimum-rate cut,
 * shutdown, a response stream that failed).
 */
export type RequestEnd = 'complete' | 'client' | 'server'

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
  /** SHA-256 the client declared for the whole file (hex), checked at completion; '' if none. */
  sha256: string
  /**
   * The name of the API key that opened the session (services/keys.ts; never its secret): only
   * that key may use it. Absent only for sessions of dropcode 0.1, which no key may use.
   */
  keyId?: string
  /** How chunks are laid out in storage, settled by the first chunk that decides it (BlobStore-specific). */
  layout?: string
  /**
   * The chunk size the client declared at /upload/start (`chunk_size`): every chunk but the last
   * holds exactly this many bytes, the last at most as many. Lets a driver write each chunk in
   * place, at its offset (fs), so completion copies nothing. Absent: chunks of any size.
   */
  chunkSize?: number
  /**
   * Present on an upload opened through a resumable-upload protocol (tus, routes/tus.ts): JSON of
   * its `ResumableInfo`. Such a session has no chunk count (`totalChunks` 0): its chunks are the
   * appends in order, 0…n−1, each stored right after the one before.
   */
  resumable?: string
}

/** What a resumable (tus) upload keeps beside its session (`UploadSession.resumable`, JSON). */
export interface ResumableInfo {
  /** Upload-Length in bytes, when declared at creation; absent while deferred (an append declares it). */
  length?: number
  /** The Upload-Metadata header as it was sent (HEAD answers it back). */
  metadata?: string
  /** A partial upload (tus concatenation): never published by itself, only as part of a final one. */
  partial?: boolean
  /** A final upload (tus concatenation): the ids of its partial uploads, in order. */
  final?: string[]
}

/** What the state keeps of a received chunk. */
export interface ChunkRecord {
  /** Bytes. */
  size: number
  /**
   * SHA-256 of the chunk's bytes, hex; '' for an append whose bytes were folded into the
   * upload's running SHA-256 as they streamed (`through`), which hashes them once, not twice,
   * and for an append of a partial upload, whose bytes its final upload hashes
   * (services/concatenation.ts).
   */
  sha256: string
  /** The BlobStore's receipt (opaque to the state layer: it only stores it). */
  receipt: string
  /** A resumable upload's length (bytes), declared by this append (it was deferred at creation). */
  declaresLength?: number
  /**
   * An append folded as it streamed (services/appends.ts): the SHA-256 of the upload's bytes from
   * its start through this append's last byte, hex. It names the bytes the fold took, as `sha256`
   * does for other chunks (services/prefix-digest.ts).
   */
  through?: string
}

/** What names a chunk's bytes for a running SHA-256: its own digest, or for a folded append the running one. */
export const chunkIdentity = (c: Pick<ChunkRecord, 'sha256' | 'through'>): string => c.through ?? c.sha256

export interface SessionView {
  session: UploadSession
  /** Received chunks by index. */
  chunks: Map<number, ChunkRecord>
}

/**
 * Who needs an object kept: a file record (`f:CODE`) or a chunked session (`s:ID`). The
 * cleanup index remembers owners so the sweeper can ask them before deleting.
 *
 * A publish passes through two more forms (services/files.ts): `p:CODE` while the record may
 * exist but its code has not been answered (registered before the record is created), and
 * `x:CODE` once the publish is given up (by the request that failed, or by a sweeper whose lease
 * found it still pending): its code is never answered, so its record, if it exists or appears
 * later, is retracted before the object goes.
 */
export type Owner = `f:${string}` | `s:${string}` | `p:${string}` | `x:${string}`
export const fileOwner = (code: string): Owner => `f:${code}`
export const pendingOwner = (code: string): Owner => `p:${code}`
/** True when `keyId` may use `session`: only the key that opened it (a session of dropcode 0.1 has none, and is no one's). */
export const ownedBy = (session: { keyId?: string | undefined }, keyId: string) => session.keyId === keyId
export const sessionOwner = (id: string): Owner => `s:${id}`

/**
 * What an API key may do beyond its being valid; an absent limit is the service's own
 * (MAX_FILE_SIZE, MAX_DOWNLOADS, …), and a key's limit never lifts the service's.
 */
export interface KeyLimits {
  /** Bytes of one file. */
  maxFileSize?: number
  /** Highest max_downloads an upload may ask for. */
  maxDownloads?: number
  /** Highest expiry_hours an upload may ask for. */
  maxExpiryHours?: number
  /** Bytes of live files plus open sessions' received bytes (and uploads in flight). */
  quotaBytes?: number
  /** Chunked (or tus) sessions open at once. */
  maxOpenSessions?: number
  /** New uploads (POST /upload, /upload/start) per minute. */
  uploadsPerMinute?: number
}

/**
 * An API key kept as data (services/keys.ts): its name is its identity (sessions, usage and
 * files belong to the name, so a rotated key keeps them); its secrets are kept only as hashes.
 */
export interface ApiKeyRecord {
  /** 1–64 of A–Z a–z 0–9 . _ - (safe in Redis key names and metric labels). */
  name: string
  /** May manage keys (the keys API). */
  admin: boolean
  /** Epoch ms. */
  createdAt: number
  /** Epoch ms from which the key is refused; absent: never. */
  expiresAt?: number
  limits: KeyLimits
  /**
   * Hex SHA-256 of each secret that opens the key → epoch ms until which it does (0: no end).
   * A rotation adds one and ends the others after a grace period.
   */
  secrets: Record<string, number>
}

/** What a key holds, from its ledger (KeyStore.account). */
export interface KeyUsage {
  /** Bytes of live files, open sessions' received chunks and uploads in flight. */
  bytes: number
  /** Epoch ms of the key's last upload start (0: never). */
  lastUsedAt: number
}
