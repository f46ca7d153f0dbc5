/**
 * The JSON answers of the interface (../shared/spec/interface.md and the README), as the service
 * sends them and its clients read them: the server's TypeBox schemas (routes/schemas.ts) are
 * checked against these types when it compiles, the CLI (cli/) and the web page (web/src/)
 * read answers through them. Types only, and the one header that tells the service's answers
 * from anything else's.
 */

/**
 * The response header naming the service's version (lower case, as Node reports headers). Every
 * answer of the service carries it; one without it came from something else (a proxy's own page,
 * a URL that is not a dropcode service).
 */
export const VERSION_HEADER = 'dropcode-version'

/** The response header naming an error answer's code (`DROPCODE_…`), for answers without a body (HEAD). */
export const ERROR_HEADER = 'dropcode-error'

/** Every error code the service answers with (core/errors.ts holds each one's status and message). */
export type ErrorCode =
  | 'DROPCODE_UNAUTHORIZED'
  | 'DROPCODE_BAD_REQUEST'
  | 'DROPCODE_REQUEST_TIMEOUT'
  | 'DROPCODE_HEADERS_TOO_LARGE'
  | 'DROPCODE_NOT_MULTIPART'
  | 'DROPCODE_MALFORMED_MULTIPART'
  | 'DROPCODE_MISSING_FILE'
  | 'DROPCODE_MISSING_FIELD'
  | 'DROPCODE_TOO_MANY_FILES'
  | 'DROPCODE_TOO_MANY_PARTS'
  | 'DROPCODE_INVALID_FIELD'
  | 'DROPCODE_DUPLICATE_FIELD'
  | 'DROPCODE_FILE_TOO_LARGE'
  | 'DROPCODE_CHUNK_TOO_LARGE'
  | 'DROPCODE_CHUNK_TOO_SMALL'
  | 'DROPCODE_CHUNK_SIZE_MISMATCH'
  | 'DROPCODE_DIGEST_MISMATCH'
  | 'DROPCODE_RANGE_NOT_SATISFIABLE'
  | 'DROPCODE_CHUNKS_MISSING'
  | 'DROPCODE_SESSION_BUSY'
  | 'DROPCODE_SESSION_NOT_FOUND'
  | 'DROPCODE_OFFSET_MISMATCH'
  | 'DROPCODE_UPLOAD_LOCKED'
  | 'DROPCODE_CHECKSUM_MISMATCH'
  | 'DROPCODE_UNSUPPORTED_MEDIA_TYPE'
  | 'DROPCODE_TUS_VERSION'
  | 'DROPCODE_FILE_NOT_FOUND'
  | 'DROPCODE_ROUTE_NOT_FOUND'
  | 'DROPCODE_RATE_LIMITED'
  | 'DROPCODE_TOO_MANY_SESSIONS'
  | 'DROPCODE_QUOTA_EXCEEDED'
  | 'DROPCODE_FORBIDDEN'
  | 'DROPCODE_KEY_NOT_FOUND'
  | 'DROPCODE_KEY_EXISTS'
  | 'DROPCODE_BUSY'
  | 'DROPCODE_STATE_FULL'
  | 'DROPCODE_STATE_UNAVAILABLE'
  | 'DROPCODE_STORAGE_UNAVAILABLE'
  | 'DROPCODE_STORAGE_FULL'
  | 'DROPCODE_INTERNAL'

/** Any error answer of the JSON endpoints. */
export interface ErrorAnswer {
  error: string
  code: ErrorCode
  /** On 5xx answers: the id under which the service logged the failure. */
  request_id?: string
  /** Seconds, on answers that say when to try again (also in the Retry-After header). */
  retry_after?: number
  /** DROPCODE_CHUNKS_MISSING: the indexes still missing. */
  missing_chunks?: number[]
  /**
   * A refusal by a limit of the API key (or of the service): which one (`max_file_size`,
   * `max_downloads`, `max_expiry_hours`, `quota_bytes`, `max_open_sessions`,
   * `uploads_per_minute`), its value, and whose it is (the key's name, or "service").
   */
  limit?: keyof KeyLimitsAnswer
  limit_value?: number
  limit_of?: string
}

/** POST /upload, and POST /upload/complete. */
export interface UploadAnswer {
  code: string
  size: number
  sha256: string
}

/** POST /upload/start. */
export interface StartAnswer {
  upload_id: string
}

/** POST /upload/chunk. */
export interface ChunkAnswer {
  success: boolean
  received_chunks: number
  total_chunks: number
  chunk_index: number
}

/** One received chunk, in a VerifyAnswer. */
export interface ChunkRecord {
  index: number
  size: number
  sha256: string
}

/** POST /upload/verify. */
export interface VerifyAnswer {
  upload_id: string
  filename: string
  total_chunks: number
  received_chunks: number
  missing_chunks: number[]
  max_downloads: number
  expiry_hours: number
  chunks: ChunkRecord[]
  completed: boolean
  code?: string
  size?: number
  sha256?: string
}

/** DELETE /delete/{code}. */
export interface DeleteAnswer {
  message: string
}

/** GET /limits. */
export interface LimitsAnswer {
  max_file_size: number
  max_chunk_size: number
  max_total_chunks: number
  max_downloads: number
  max_expiry_hours: number
  default_max_downloads: number
  default_expiry_hours: number
  chunks_in_flight: number
  chunk_size: number
}

/** An API key's limits (POST /admin/keys takes them, GET /admin/keys shows them); absent: the service's own. */
export interface KeyLimitsAnswer {
  /** Bytes of one file. */
  max_file_size?: number
  max_downloads?: number
  max_expiry_hours?: number
  /** Bytes of live files, open sessions' chunks and uploads in flight. */
  quota_bytes?: number
  /** Chunked sessions open at once. */
  max_open_sessions?: number
  /** New uploads (POST /upload, POST /upload/start) per minute. */
  uploads_per_minute?: number
}

/** POST /admin/keys: the key to create. */
export interface KeyCreateRequest extends KeyLimitsAnswer {
  /** 1–64 of A–Z a–z 0–9 . _ - */
  name: string
  /** May manage keys. Default false. */
  admin?: boolean
  /** Hours until the key is refused; absent: never. */
  expires_in_hours?: number
}

/** One key as GET /admin/keys lists it (never its secret). */
export interface KeyAnswer {
  name: string
  admin: boolean
  /** `store`: created with the keys API; `environment`: from API_KEYS (or the generated key), managed there. */
  source: 'store' | 'environment'
  /** ISO 8601; null for environment keys. */
  created_at: string | null
  /** ISO 8601, or null: never. */
  expires_at: string | null
  limits: KeyLimitsAnswer
  /** While a rotation's grace runs: until when the previous secret still works (ISO 8601). */
  previous_secret_until: string | null
  usage: {
    /** Bytes the key holds now (what its quota counts). */
    stored_bytes: number
    /** ISO 8601 of its last upload (begun, for a key with a quota; stored, for one without), or null. */
    last_used_at: string | null
  }
}

/** POST /admin/keys (201) and POST /admin/keys/{name}/rotate (200): the key, with its new secret, shown this once. */
export interface KeySecretAnswer extends KeyAnswer {
  secret: string
}

/** GET /admin/keys. */
export interface KeyListAnswer {
  keys: KeyAnswer[]
}

/** GET /key: which key the request's X-Client-Key is (401 for none). */
export interface WhoAmIAnswer {
  name: string
  admin: boolean
}

/** DELETE /admin/keys/{name}. */
export interface KeyRevokeAnswer {
  name: string
  revoked: true
}
