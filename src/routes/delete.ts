/** DELETE /delete/{code}: removes a live file; no key needed (holding the code is enough). */
import type { FastifyInstance } from 'fastify'
import { DeleteResponse, errorResponses } from './schemas.js'

export default async function deleteRoutes (app: FastifyInstance) {
  app.delete('/delete/:code', {
    onRequest: app.rateLimits.lookupGate,
    onResponse: app.rateLimits.lookupFailed,
    schema: { summary: 'Delete a file by its code', tags: ['delete'], response: { 200: DeleteResponse, ...errorResponses(404, 429, 500, 503) } }
  }, async (req) => {
    await app.files.remove((req.params as { code: string }).code)
    return { message: 'File deleted.' }
  })
}
