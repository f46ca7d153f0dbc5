/** DELETE /delete/{code}: removes a live file; no key needed (holding the code is enough). */
import type { FastifyInstance } from 'fastify'
import { isCode } from '../ids.js'
import { FileNotFound } from '../services/files.js'
import { DeleteResponse, errorResponses } from './schemas.js'

export default async function deleteRoutes (app: FastifyInstance) {
  app.delete('/delete/:code', {
    onRequest: app.rateLimits.lookupGate,
    onResponse: app.rateLimits.lookupFailed,
    schema: { summary: 'Delete a file by its code', tags: ['delete'], response: { 200: DeleteResponse, ...errorResponses(404, 429, 500, 503) } }
  }, async (req) => {
    const { code } = req.params as { code: string }
    if (!isCode(code)) throw new FileNotFound('unknown')
    await app.files.remove(code)
    return { message: 'File deleted.' }
  })
}
