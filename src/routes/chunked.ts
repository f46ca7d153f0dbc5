/**
 * The chunked-upload endpoints: /upload/start, /upload/chunk, /upload/verify,
 * /upload/complete. All take multipart/form-data and an API key; a session answers only the key
 * that opened it (any other gets 404, as for an unknown session). Orchestration lives in
 * services/sessions.ts; these handlers parse fields and map results.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import { parseFields } from '../http/form-fields.js'
import { admitBody, declaredLength, readFields, readForm } from '../http/multipart-form.js'
import {
  ChunkFields, ChunkResponse, CompleteFields, errorResponses, multipartBody, SessionFields, StartResponse, startFields, UploadResponse, VerifyResponse
} from './schemas.js'
import { fileSettings, reserveRoom } from './key-limits.js'

const chunkedRoutes: FastifyPluginAsyncTypebox<{ config: Pick<Config, 'limits'> }> = async (app, { config }) => {
  const StartFields = startFields(config.limits)
  const common = { tags: ['chunked upload'], security: [{ apiKey: [] }] }
  const onRequest = app.uploadGuards

  app.post('/upload/start', {
    config: { crossOrigin: true },
    onRequest: [...onRequest, app.rateLimits.newUploads],
    schema: { ...common, summary: 'Open a chunked upload session', multipart: multipartBody(StartFields), response: { 200: StartResponse, ...errorResponses(400, 401, 403, 413, 429, 500, 503, 507) } }
  }, async (req) => {
    const f = await readFields(req, StartFields)
    const { maxDownloads, expiryHours } = fileSettings(req, { maxDownloads: f.max_downloads, expiryHours: f.expiry_hours })
    return { upload_id: await app.sessions.start({ filename: f.filename, totalChunks: f.total_chunks, maxDownloads, expiryHours, sha256: f.sha256?.toLowerCase(), chunkSize: f.chunk_size }, req.apiKey!) }
  })

  app.post('/upload/chunk', {
    config: { crossOrigin: true },
    onRequest: [...onRequest, app.sizeGuard(config.limits.maxChunkSize, 'DROPCODE_CHUNK_TOO_LARGE'), reserveRoom(app, key => Math.min(config.limits.maxChunkSize, key.limits.maxFileSize)), app.transferSlots.upload],
    schema: {
      ...common,
      summary: 'Upload one chunk (upload_id and chunk_index before the chunk part)',
      multipart: multipartBody(ChunkFields, { name: 'chunk', description: 'The chunk data (at most MAX_CHUNK_SIZE bytes).' }),
      response: { 200: ChunkResponse, ...errorResponses(400, 401, 403, 404, 409, 413, 429, 500, 503, 507) }
    }
  }, async (req, reply) => {
    // S3: not a byte of the body is read until upload memory is promised to it (parts.ts).
    const ticket = await admitBody(req, reply, app.files.admit)
    const form = await readForm(req, 'chunk', ChunkFields, async (stream, _filename, before) => {
      // The chunk is streamed to its place as it arrives, so its session must be known first.
      if (before.upload_id === undefined || before.chunk_index === undefined) {
        throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Send "upload_id" and "chunk_index" before the "chunk" file part.')
      }
      const { upload_id: id, chunk_index: index } = parseFields(ChunkFields, before)
      return await app.sessions.receiveChunk(id, index, stream, req.apiKey!, { maxLength: declaredLength(req), ticket, hold: req.hold ?? undefined })
    }).finally(() => ticket?.release())
    // A failure after the chunk was stored (a second file, say) aborted it: a 4xx records nothing.
    if (form.file === undefined) throw new DropcodeError('DROPCODE_MISSING_FILE', 'Missing chunk: send it as the multipart file field "chunk".')
    const { received, total } = await form.file.commit({ sha256: form.fields.chunk_sha256?.toLowerCase() })
    return { success: true, received_chunks: received, total_chunks: total, chunk_index: form.fields.chunk_index }
  })

  app.post('/upload/verify', {
    config: { crossOrigin: true },
    onRequest,
    schema: {
      ...common,
      summary: 'Which chunks have arrived, or the code of a completed session',
      description: 'A completed session answers completed: true with its code, size and sha256 for as long as a repeated complete answers them (SESSION_TTL_SECONDS after completion), then 404.',
      multipart: multipartBody(SessionFields),
      response: { 200: VerifyResponse, ...errorResponses(400, 401, 404, 429, 500, 503) }
    }
  }, async (req) => {
    const { upload_id: id } = await readFields(req, SessionFields)
    const status = await app.sessions.status(id, req.keyId)
    const { session, chunks } = status
    const missing: number[] = []
    for (let i = 0; i < session.totalChunks; i++) if (!chunks.has(i)) missing.push(i)
    return {
      upload_id: session.id,
      filename: session.filename,
      total_chunks: session.totalChunks,
      received_chunks: chunks.size,
      missing_chunks: missing,
      max_downloads: session.maxDownloads,
      expiry_hours: session.expiryHours,
      chunks: [...chunks].sort((a, b) => a[0] - b[0]).map(([index, c]) => ({ index, size: c.size, sha256: c.sha256 })),
      completed: status.completed,
      ...(status.completed ? status.result : {})
    }
  })

  app.post('/upload/complete', {
    config: { crossOrigin: true },
    onRequest: [...onRequest, app.transferSlots.upload],
    schema: {
      ...common,
      summary: 'Complete a session: assemble the chunks and answer the download code',
      description: '400 with missing_chunks while chunks are missing; 409 while another complete runs; the same code when repeated.',
      multipart: multipartBody(CompleteFields),
      response: { 200: UploadResponse, ...errorResponses(400, 401, 404, 409, 413, 429, 500, 503, 507) }
    }
  }, async (req) => {
    const { upload_id: id, sha256 } = await readFields(req, CompleteFields)
    // Assembling a large session can keep the socket silent for minutes (S3 completing many
    // parts, or small-chunk sessions streamed into one object): exempt it from the stall guard.
    req.allowSilence()
    return await app.sessions.complete(id, req.apiKey!, sha256?.toLowerCase())
  })
}
export default chunkedRoutes
