/** Response schemas of the interface (also the source of the OpenAPI document). */
import { Type } from 'typebox'

export const ErrorBody = Type.Object({
  error: Type.String({ description: 'What went wrong, for people.' }),
  code: Type.String({ description: 'Stable DROPCODE_* error code, for programs.' })
}, { additionalProperties: true })

export const UploadResponse = Type.Object({
  code: Type.String({ pattern: '^[A-Za-z0-9]{6}$', description: '6-character download code.' })
})

export const DeleteResponse = Type.Object({
  message: Type.String()
})
