/**
 * The request and response shapes of the interface, as TypeBox schemas: the same objects
 * validate requests (multipart fields through http/form-fields.ts, path parameters through
 * fastify) and produce /openapi.json. Each answer's schema is checked, when this compiles,
 * against the type the clients read it through (api/answers.ts).
 */
import { Type, type Static, type TObject, type TProperties } from 'typebox'
import type { ChunkAnswer, DeleteAnswer, LimitsAnswer, StartAnswer, UploadAnswer, VerifyAnswer } from '../api/answers.js'
import type { Config } from '../config.js'

type Limits = Config['limits']

export const ErrorBody = Type.Object({
  error: Type.String({ description: 'What went wrong, for people.' }),
  code: Type.String({ description: 'Stable DROPCODE_* error code, for programs.' })
}, { additionalProperties: true })

/** Errors of the JSON endpoints: the error body, by status. */
export function errorResponses (...statuses: number[]) {
  return Object.fromEntries(statuses.map(s => [s, ErrorBody]))
}

export const CodeParams = Type.Object({ code: Type.String({ description: '6-character download code.' }) })

/** The interface's defaults for a file's settings. */
export const DEFAULT_MAX_DOWNLOADS = 1
export const DEFAULT_EXPIRY_HOURS = 24

// No schema default: an absent value takes the interface's default, lowered to the key's limit
// if that is lower (routes/key-limits.ts), which a default filled in here could not tell apart.
const maxDownloads = (limits: Limits) => Type.Optional(Type.Integer({ minimum: 1, maximum: limits.maxDownloads, description: `Downloads allowed (default ${DEFAULT_MAX_DOWNLOADS}, or the API key's max_downloads if lower).` }))
const expiryHours = (limits: Limits) => Type.Optional(Type.Integer({ minimum: 1, maximum: limits.maxExpiryHours, description: `Hours until the file expires (default ${DEFAULT_EXPIRY_HOURS}, or the API key's max_expiry_hours if lower).` }))
const UploadId = Type.String({ pattern: '^[A-Za-z0-9_-]{22}$', description: 'the upload_id from /upload/start: 22 base64url characters' })
const sha256Of = (what: string) => Type.Optional(Type.String({ pattern: '^[0-9a-fA-F]{64}$', description: `the SHA-256 of ${what}, 64 hex digits; a mismatch answers 400 DROPCODE_DIGEST_MISMATCH and stores nothing` }))

/** POST /upload fields (besides the file part). */
export const uploadFields = (limits: Limits) => Type.Object({
  max_downloads: maxDownloads(limits),
  expiry_hours: expiryHours(limits),
  sha256: sha256Of('the file')
})

/** POST /upload/start fields. */
export const startFields = (limits: Limits) => Type.Object({
  filename: Type.String({ minLength: 1, pattern: '\\S', description: 'the name of the file being uploaded, not empty' }),
  total_chunks: Type.Integer({ minimum: 1, maximum: limits.maxTotalChunks, description: 'Chunks the session expects.' }),
  max_downloads: maxDownloads(limits),
  expiry_hours: expiryHours(limits),
  sha256: sha256Of('the whole file, checked when the session completes'),
  chunk_size: Type.Optional(Type.Integer({
    minimum: 1,
    maximum: limits.maxChunkSize,
    description: 'Bytes in every chunk but the last (which holds at most as many); a chunk of another size is refused. Lets the service store each chunk in place, so completion copies nothing.'
  }))
})

/** POST /upload/chunk fields; they must come before the `chunk` file part. */
export const ChunkFields = Type.Object({
  upload_id: UploadId,
  chunk_index: Type.Integer({ minimum: 0, maximum: 99_999, description: '0-based index of this chunk (below total_chunks).' }),
  chunk_sha256: sha256Of('this chunk (before or after the chunk part)')
})

/** POST /upload/verify fields. */
export const SessionFields = Type.Object({ upload_id: UploadId })

/** POST /upload/complete fields. */
export const CompleteFields = Type.Object({
  upload_id: UploadId,
  sha256: sha256Of('the whole file (besides or instead of the one declared at /upload/start): the session is not published unless it matches')
})

/** The OpenAPI description of a multipart body: the field schema plus its file part. */
export function multipartBody<T extends TProperties> (fields: TObject<T>, file?: { name: string, description: string }) {
  return Type.Object({
    ...fields.properties,
    ...(file !== undefined ? { [file.name]: Type.String({ format: 'binary', description: file.description }) } : {})
  })
}

export const UploadResponse = Type.Object({
  code: Type.String({ pattern: '^[A-Za-z0-9]{6}$', description: '6-character download code.' }),
  size: Type.Integer({ description: 'Bytes stored.' }),
  sha256: Type.String({ description: 'SHA-256 of the bytes stored, computed by the service, hex.' })
})
export const StartResponse = Type.Object({ upload_id: Type.String() })
export const ChunkResponse = Type.Object({
  success: Type.Boolean(),
  received_chunks: Type.Integer(),
  total_chunks: Type.Integer(),
  chunk_index: Type.Integer()
})
export const VerifyResponse = Type.Object({
  upload_id: Type.String(),
  filename: Type.String(),
  total_chunks: Type.Integer(),
  received_chunks: Type.Integer(),
  missing_chunks: Type.Array(Type.Integer()),
  max_downloads: Type.Integer(),
  expiry_hours: Type.Integer(),
  chunks: Type.Array(Type.Object({
    index: Type.Integer(),
    size: Type.Integer({ description: 'Bytes.' }),
    sha256: Type.String({ description: 'SHA-256 of the chunk as stored, hex.' })
  }), { description: 'Every received chunk, by index (of a completed session: the chunks it was assembled from).' }),
  completed: Type.Boolean({ description: 'true once the session completed: code, size and sha256 follow, as a repeated complete answers them.' }),
  code: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9]{6}$', description: 'The completed session\'s download code (the file may since have expired, been deleted or used up).' })),
  size: Type.Optional(Type.Integer({ description: 'Bytes stored, of a completed session.' })),
  sha256: Type.Optional(Type.String({ description: 'SHA-256 of the bytes stored, of a completed session, hex.' }))
})
export const DeleteResponse = Type.Object({ message: Type.String() })

/** GET /limits: what an upload may be, for clients that want to check before sending (the web page). */
export const LimitsResponse = Type.Object({
  max_file_size: Type.Integer({ description: 'Largest file accepted, in bytes (MAX_FILE_SIZE).' }),
  max_chunk_size: Type.Integer({ description: 'Largest chunk accepted by /upload/chunk, in bytes (MAX_CHUNK_SIZE).' }),
  max_total_chunks: Type.Integer({ description: 'Largest total_chunks accepted by /upload/start (MAX_TOTAL_CHUNKS).' }),
  max_downloads: Type.Integer({ description: 'Largest max_downloads accepted (MAX_DOWNLOADS).' }),
  max_expiry_hours: Type.Integer({ description: 'Largest expiry_hours accepted (MAX_EXPIRY_HOURS).' }),
  default_max_downloads: Type.Integer({ description: 'max_downloads when none is sent.' }),
  default_expiry_hours: Type.Integer({ description: 'expiry_hours when none is sent.' }),
  chunks_in_flight: Type.Integer({ minimum: 1, description: 'How many chunks of one session a client should send at once to upload fastest to this storage (a hint): 1 on the filesystem, where more in flight were slower (measured: docs/cli.md); 4 on S3, where each chunk is a multipart part and parts in parallel hide the storage\'s latency.' }),
  chunk_size: Type.Integer({ minimum: 1, description: 'Bytes per chunk (the chunk_size to declare at /upload/start) with which this storage takes a chunked upload fastest (a hint, at most max_chunk_size): 64 MiB on the filesystem, where each chunk costs a few milliseconds besides its bytes; S3_PART_SIZE on S3, where each chunk is one part held in the service\'s part memory.' })
})

/** True only when A and B are the same type (each assignable to the other, optional fields alike). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? ([Required<A>] extends [Required<B>] ? ([Required<B>] extends [Required<A>] ? true : false) : false) : false) : false
/** Fails to compile when a schema and its answer type part ways. */
function agree<T extends true> (): T | undefined { return undefined }
agree<Same<Static<typeof UploadResponse>, UploadAnswer>>()
agree<Same<Static<typeof StartResponse>, StartAnswer>>()
agree<Same<Static<typeof ChunkResponse>, ChunkAnswer>>()
agree<Same<Static<typeof VerifyResponse>, VerifyAnswer>>()
agree<Same<Static<typeof DeleteResponse>, DeleteAnswer>>()
agree<Same<Static<typeof LimitsResponse>, LimitsAnswer>>()
