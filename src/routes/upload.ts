/** POST /upload: one file in one multipart request. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import { admitBody, declaredLength, readForm } from '../http/multipart-form.js'
import { fileSettings, reserveRoom } from './key-limits.js'
import { errorResponses, multipartBody, uploadFields, UploadResponse } from './schemas.js'

const uploadRoutes: FastifyPluginAsyncTypebox<{ config: Pick<Config, 'limits'> }> = async (app, { config }) => {
  const Fields = uploadFields(config.limits)
  app.post('/upload', {
    config: { crossOrigin: true },
    // reserveRoom refuses a declared length over the key's file limit (never above MAX_FILE_SIZE).
    onRequest: [...app.uploadGuards, app.rateLimits.newUploads, reserveRoom(app, key => key.limits.maxFileSize), app.transferSlots.upload],
    schema: {
      summary: 'Upload one file',
      description: 'Fields may come before or after the file. Answers the download code.',
      tags: ['upload'],
      security: [{ apiKey: [] }],
      multipart: multipartBody(Fields, { name: 'file', description: 'The file (exactly one).' }),
      response: { 200: UploadResponse, ...errorResponses(400, 401, 403, 413, 429, 500, 503, 507) }
    }
  }, async (req, reply) => {
    // S3: not a byte of the body is read until upload memory is promised to it (parts.ts).
    const ticket = await admitBody(req, reply, app.files.admit)
    const form = await readForm(req, 'file', Fields, (stream, filename) => app.files.receive(stream, filename, { maxLength: declaredLength(req), ticket, hold: req.hold ?? undefined }))
      .finally(() => ticket?.release())
    if (form.file === undefined) throw new DropcodeError('DROPCODE_MISSING_FILE')
    let settings: ReturnType<typeof fileSettings>
    try {
      settings = fileSettings(req, { maxDownloads: form.fields.max_downloads, expiryHours: form.fields.expiry_hours })
    } catch (err) {
      await form.file.abort()
      throw err
    }
    const { maxDownloads, expiryHours } = settings
    const file = await form.file.commit({ maxDownloads, expiryHours, sha256: form.fields.sha256?.toLowerCase() })
    req.log.info({ size: file.size, maxDownloads, expiryHours }, 'file uploaded')
    return { code: file.code, size: file.size, sha256: file.sha256 }
  })
}
export default uploadRoutes
