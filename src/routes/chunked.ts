/**
 * The chunked-upload endpoints: /upload/start, /upload/chunk, /upload/verify,
 * /upload/complete. All take multipart/form-data and an API key. Orchestration lives in
 * services/sessions.ts; these handlers parse fields and map results.
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Config } from '../config.js'
import { DropcodeError } from '../errors.js'
import { readForm } from '../http/multipart-form.js'
import { uploadGuards } from '../plugins/auth.js'
import { chunkIndex, positiveInt, required, uploadId } from './fields.js'
import { errorResponses, ExpiryHours, MaxDownloads, UploadId, UploadResponse } from './schemas.js'

const StartResponse = Type.Object({ upload_id: Type.String() })
const ChunkResponse = Type.Object({
  success: Type.Boolean(),
  received_chunks: Type.Integer(),
  total_chunks: Type.Integer(),
  chunk_index: Type.Integer()
})
const VerifyResponse = Type.Object({
  upload_id: Type.String(),
  filename: Type.String(),
  total_chunks: Type.Integer(),
  received_chunks: Type.Integer(),
  missing_chunks: Type.Array(Type.Integer()),
  max_downloads: Type.Integer(),
  expiry_hours: Type.Integer()
})
const common = { tags: ['chunked upload'], security: [{ apiKey: [] }] }

/** A form with text fields only (a file part is refused). */
const fieldsOnly = <F extends string>(req: Parameters<typeof readForm>[0], names: readonly F[]) =>
  readForm(req, '', names, { store: async () => undefined, discard: async () => {} })

export default async function chunkedRoutes (app: FastifyInstance, { config }: { config: Config }) {
  const { limits } = config
  const onRequest = uploadGuards(app, config)

  app.post('/upload/start', {
    onRequest,
    schema: {
      ...common,
      summary: 'Open a chunked upload session',
      multipart: Type.Object({
        filename: Type.String({ description: 'Name of the file being uploaded.' }),
        total_chunks: Type.Integer({ minimum: 1, description: 'Chunks the session expects (1…MAX_TOTAL_CHUNKS).' }),
        max_downloads: MaxDownloads,
        expiry_hours: ExpiryHours
      }),
      response: { 200: StartResponse, ...errorResponses(400, 401, 429, 500, 503) }
    }
  }, async (req) => {
    const { fields } = await fieldsOnly(req, ['filename', 'total_chunks', 'max_downloads', 'expiry_hours'] as const)
    const filename = required('filename', fields.filename)
    if (filename.trim() === '') throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Field "filename" must not be empty.')
    const settings = {
      filename,
      totalChunks: positiveInt('total_chunks', required('total_chunks', fields.total_chunks), limits.maxTotalChunks, 1),
      maxDownloads: positiveInt('max_downloads', fields.max_downloads, limits.maxDownloads, 1),
      expiryHours: positiveInt('expiry_hours', fields.expiry_hours, limits.maxExpiryHours, 24)
    }
    return { upload_id: await app.sessions.start(settings) }
  })

  app.post('/upload/chunk', {
    onRequest,
    schema: {
      ...common,
      summary: 'Upload one chunk (upload_id and chunk_index before the chunk part)',
      multipart: Type.Object({
        upload_id: UploadId,
        chunk_index: Type.Integer({ minimum: 0, description: '0-based index of this chunk.' }),
        chunk: Type.String({ format: 'binary', description: 'The chunk data (at most MAX_CHUNK_SIZE bytes).' })
      }),
      response: { 200: ChunkResponse, ...errorResponses(400, 401, 429, 404, 409, 413, 500, 503) }
    }
  }, async (req) => {
    let index = -1
    let id = ''
    const form = await readForm(req, 'chunk', ['upload_id', 'chunk_index'] as const, {
      store: async (stream, _filename, before) => {
        // The chunk is streamed to its place as it arrives, so its session must be known first.
        if (before.upload_id === undefined || before.chunk_index === undefined) {
          throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Send "upload_id" and "chunk_index" before the "chunk" file part.')
        }
        index = chunkIndex(before.chunk_index)
        id = uploadId(before.upload_id)
        return await app.sessions.receiveChunk(id, index, stream)
      },
      // The request failed after the chunk was stored (a second file, say): a 4xx records nothing.
      discard: () => app.sessions.dropChunk(id, index)
    })
    if (form.file === undefined) {
      uploadId(form.fields.upload_id)
      chunkIndex(form.fields.chunk_index)
      throw new DropcodeError('DROPCODE_MISSING_FILE', 'Missing chunk: send it as the multipart file field "chunk".')
    }
    return { success: true, received_chunks: form.file.received, total_chunks: form.file.total, chunk_index: index }
  })

  app.post('/upload/verify', {
    onRequest,
    schema: { ...common, summary: 'Which chunks have arrived', multipart: Type.Object({ upload_id: UploadId }), response: { 200: VerifyResponse, ...errorResponses(400, 401, 429, 404, 500, 503) } }
  }, async (req) => {
    const { fields } = await fieldsOnly(req, ['upload_id'] as const)
    const { session, received } = await app.sessions.status(uploadId(fields.upload_id))
    const have = new Set(received)
    const missing: number[] = []
    for (let i = 0; i < session.totalChunks; i++) if (!have.has(i)) missing.push(i)
    return {
      upload_id: session.id,
      filename: session.filename,
      total_chunks: session.totalChunks,
      received_chunks: received.length,
      missing_chunks: missing,
      max_downloads: session.maxDownloads,
      expiry_hours: session.expiryHours
    }
  })

  app.post('/upload/complete', {
    onRequest,
    schema: {
      ...common,
      summary: 'Complete a session: assemble the chunks and answer the download code',
      description: '400 with missing_chunks while chunks are missing; 409 while another complete runs; the same code when repeated.',
      multipart: Type.Object({ upload_id: UploadId }),
      response: { 200: UploadResponse, ...errorResponses(400, 401, 429, 404, 409, 413, 500, 503) }
    }
  }, async (req) => {
    const { fields } = await fieldsOnly(req, ['upload_id'] as const)
    // Assembling a large session can keep the socket silent for minutes (S3 completing many
    // parts, or small-chunk sessions streamed into one object): exempt it from the stall guard.
    req.allowSilence()
    return { code: await app.sessions.complete(uploadId(fields.upload_id)) }
  })
}
