/**
 * The error catalogue: every error dropcode answers with, by stable code. Services and drivers
 * throw `new DropcodeError('DROPCODE_…')`; one error handler (plugins/error-handler.ts) renders
 * them as `{ "error": message, "code": code }` on API routes and as an HTML page on downloads.
 * Each code is listed in docs/errors.md (a test checks), and in api/answers.ts's ErrorCode, which the
 * clients read (the compiler checks: neither may hold a code the other lacks).
 */
import type { ErrorCode } from '../api/answers.js'

export const ERROR_CATALOGUE = {
  DROPCODE_UNAUTHORIZED: { status: 401, message: 'Missing or invalid API key: send a valid key in the X-Client-Key header.' },
  DROPCODE_BAD_REQUEST: { status: 400, message: 'Bad request.' },
  DROPCODE_REQUEST_TIMEOUT: { status: 408, message: 'The request headers did not arrive in time.' },
  DROPCODE_HEADERS_TOO_LARGE: { status: 431, message: 'The request headers are too large.' },
  DROPCODE_NOT_MULTIPART: { status: 400, message: 'The request body must be multipart/form-data.' },
  DROPCODE_MALFORMED_MULTIPART: { status: 400, message: 'The multipart/form-data body is malformed or incomplete.' },
  DROPCODE_MISSING_FILE: { status: 400, message: 'Missing file: send it as the multipart file field "file".' },
  DROPCODE_MISSING_FIELD: { status: 400, message: 'A required field is missing.' },
  DROPCODE_TOO_MANY_FILES: { status: 400, message: 'Send exactly one file per request.' },
  DROPCODE_TOO_MANY_PARTS: { status: 400, message: 'Too many multipart parts or fields.' },
  DROPCODE_INVALID_FIELD: { status: 400, message: 'A field has an invalid value.' },
  DROPCODE_DUPLICATE_FIELD: { status: 400, message: 'A field was sent more than once.' },
  DROPCODE_FILE_TOO_LARGE: { status: 413, message: 'The file is larger than this service accepts.' },
  DROPCODE_CHUNK_TOO_LARGE: { status: 413, message: 'The chunk is larger than this service accepts.' },
  DROPCODE_CHUNK_TOO_SMALL: { status: 400, message: 'Every chunk but the last must be at least 5 MiB in this session, since its earlier chunks were.' },
  DROPCODE_CHUNK_SIZE_MISMATCH: { status: 400, message: 'The chunk\'s size differs from the chunk_size declared at /upload/start (every chunk but the last must hold exactly that many bytes); it was not stored.' },
  DROPCODE_DIGEST_MISMATCH: { status: 400, message: 'The SHA-256 of what arrived differs from the one declared; nothing was stored.' },
  DROPCODE_RANGE_NOT_SATISFIABLE: { status: 416, message: 'The requested range is outside the file.' },
  DROPCODE_CHUNKS_MISSING: { status: 400, message: 'Chunks are still missing; send them and complete again.' },
  DROPCODE_SESSION_BUSY: { status: 409, message: 'The session is busy (this chunk is being uploaded, or the session is completing); retry shortly.' },
  DROPCODE_SESSION_NOT_FOUND: { status: 404, message: 'No such upload session: it may have expired or been completed.' },
  DROPCODE_OFFSET_MISMATCH: { status: 409, message: 'Upload-Offset is not where the upload ends; HEAD it for its offset and resume from there.' },
  DROPCODE_UPLOAD_LOCKED: { status: 423, message: 'Another request is appending to this upload, or completing it; retry after the time in the Retry-After header.' },
  DROPCODE_CHECKSUM_MISMATCH: { status: 460, message: 'The append\'s bytes do not match its Upload-Checksum; nothing of it was kept: send it again.' },
  DROPCODE_UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'An append\'s body must be sent as Content-Type: application/offset+octet-stream.' },
  DROPCODE_TUS_VERSION: { status: 412, message: 'This service speaks tus 1.0.0: send Tus-Resumable: 1.0.0.' },
  DROPCODE_FILE_NOT_FOUND: { status: 404, message: 'No file with this code: it may have expired, reached its download limit, or been deleted.' },
  DROPCODE_ROUTE_NOT_FOUND: { status: 404, message: 'No such endpoint.' },
  DROPCODE_RATE_LIMITED: { status: 429, message: 'Too many requests; try again after the time in the Retry-After header.' },
  DROPCODE_TOO_MANY_SESSIONS: { status: 403, message: 'This API key has as many open upload sessions as allowed; complete them or let them expire first.' },
  DROPCODE_QUOTA_EXCEEDED: { status: 403, message: 'This API key holds as many bytes as its quota allows; delete files or let them expire first.' },
  DROPCODE_FORBIDDEN: { status: 403, message: 'This API key may not do this: managing keys takes an admin key.' },
  DROPCODE_KEY_NOT_FOUND: { status: 404, message: 'No API key of this name in the key store (keys from API_KEYS are managed there).' },
  DROPCODE_KEY_EXISTS: { status: 409, message: 'An API key of this name exists already.' },
  DROPCODE_BUSY: { status: 503, message: 'The service is busy; retry after the time in the Retry-After header.' },
  DROPCODE_STATE_FULL: { status: 503, message: 'The service holds as many files as it is configured to; try again later.' },
  DROPCODE_STATE_UNAVAILABLE: { status: 503, message: 'The service cannot reach its state store; try again shortly.' },
  DROPCODE_STORAGE_UNAVAILABLE: { status: 503, message: 'The service cannot reach its file storage; try again shortly.' },
  DROPCODE_STORAGE_FULL: { status: 507, message: 'The service is out of storage space; try again later.' },
  DROPCODE_INTERNAL: { status: 500, message: 'Internal server error.' }
} as const satisfies Record<ErrorCode, { status: number, message: string }>

export type { ErrorCode }

export class DropcodeError extends Error {
  override name = 'DropcodeError'
  readonly statusCode: number

  /**
   * @param code catalogue code; sets the HTTP status
   * @param message replaces the catalogue message (it is shown to the client: no internals)
   * @param details extra fields merged into the JSON error body (e.g. `missing_chunks`)
   */
  constructor (
    readonly code: ErrorCode,
    message?: string,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown }
  ) {
    super(message ?? ERROR_CATALOGUE[code].message, options)
    this.statusCode = ERROR_CATALOGUE[code].status
  }
}

export const isDropcodeError = (err: unknown): err is DropcodeError => err instanceof DropcodeError

/**
 * The error `make` builds, without a stack trace: for expected refusals that come by the
 * thousand (a guessed code's 404), where capturing the stack was the largest cost of the error
 * (issue 21). Such errors are logged by code and reason, never with a stack.
 */
export function withoutStack<T extends Error> (make: () => T): T {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return make()
  } finally {
    Error.stackTraceLimit = limit
  }
}

/** True for "no space left" (ENOSPC) and "quota exceeded" (EDQUOT), by name or errno. */
export function isOutOfSpace (err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return code === 'ENOSPC' || code === 'EDQUOT' || code === 28 || code === 122
}

/**
 * Why the service cannot start, for a person: one line naming what failed and the setting
 * involved, and a hint at the fix (server.ts prints both, without a stack trace).
 */
export class StartupError extends Error {
  override name = 'StartupError'
  constructor (message: string, readonly hint: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}
