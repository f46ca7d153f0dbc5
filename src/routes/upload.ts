/** POST /upload: one file in one multipart request. */
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { DropcodeError } from '../errors.js'
import { readForm } from '../http/multipart-form.js'
import { apiKeyGuard, requireMultipart } from '../plugins/auth.js'
import { positiveInt } from './fields.js'
import { ErrorBody, UploadResponse } from './schemas.js'

export default async function uploadRoutes (app: FastifyInstance, { config }: { config: Config }) {
  const { limits } = config
  app.post('/upload', {
    onRequest: [apiKeyGuard(config.apiKeys), requireMultipart],
    schema: {
      response: { 200: UploadResponse, '4xx': ErrorBody, '5xx': ErrorBody }
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
