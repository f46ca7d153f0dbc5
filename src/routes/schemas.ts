/** Response schemas of the interface (also the source of the OpenAPI document). */
import { Type } from 'typebox'

export const ErrorBody = Type.Object({
  error: Type.String({ description: 'What went wrong, for people.' }),
  code: Type.String({ description: 'Stable DROPCODE_* error code, for programs.' })
}, { additionalProperties: true })

export const UploadResponse = Type.Object({
  code: Type.String({ pattern: '^[A-Za-z0-9]{6}$', description: '6-character download code.' })
})

/** Field docs shared by the upload endpoints (OpenAPI only). */
export const MaxDownloads = Type.Optional(Type.Integer({ minimum: 1, default: 1, description: 'Downloads allowed (1…MAX_DOWNLOADS).' }))
export const ExpiryHours = Type.Optional(Type.Integer({ minimum: 1, default: 24, description: 'Hours until the file expires (1…MAX_EXPIRY_HOURS).' }))
export const UploadId = Type.String({ pattern: '^[A-Za-z0-9_-]{22}$', description: 'Session id from /upload/start.' })

/** Errors of the upload endpoints: the JSON error body, by status. */
export function errorResponses (...statuses: number[]) {
  return Object.fromEntries(statuses.map(s => [s, ErrorBody]))
}

export const DeleteResponse = Type.Object({
  message: Type.String()
})
