/** POST /upload: one file in one multipart request. */
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { DropcodeError } from '../errors.js'
import { readForm } from '../http/multipart-form.js'
import { uploadGuards } from '../plugins/auth.js'
import { positiveInt } from './fields.js'
import { Type } from 'typebox'
import { errorResponses, ExpiryHours, MaxDownloads, UploadResponse } from './schemas.js'

export default async function uploadRoutes (app: FastifyInstance, { config }: { config: Config }) {
  const { limits } = config
  app.post('/upload', {
    onRequest: uploadGuards(app, config),
    schema: {
      summary: 'Upload one file',
      description: 'Fields may come before or after the file. Answers the download code.',
      tags: ['upload'],
      security: [{ apiKey: [] }],
      multipart: Type.Object({
        file: Type.String({ format: 'binary', description: 'The file (exactly one).' }),
        max_downloads: MaxDownloads,
        expiry_hours: ExpiryHours
      }),
      response: { 200: UploadResponse, ...errorResponses(400, 401, 429, 413, 500, 503) }
    }
  }, async (req) => {
    const form = await readForm(req, 'file', ['max_downloads', 'expiry_hours'] as const, {
      store: (stream, filename) => app.files.receive(stream, filename),
      discard: blob => app.files.discard(blob)
    })
    if (form.file === undefined) throw new DropcodeError('DROPCODE_MISSING_FILE')
    let settings
    try {
      settings = {
        maxDownloads: positiveInt('max_downloads', form.fields.max_downloads, limits.maxDownloads, 1),
        expiryHours: positiveInt('expiry_hours', form.fields.expiry_hours, limits.maxExpiryHours, 24)
      }
    } catch (err) {
      await app.files.discard(form.file)
      throw err
    }
    const file = await app.files.publish(form.file, settings)
    req.log.info({ size: file.size, maxDownloads: file.maxDownloads, expiryHours: settings.expiryHours }, 'file uploaded')
    return { code: file.code }
  })
}
