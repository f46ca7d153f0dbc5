/** DELETE /delete/{code}: removes a live file; no key needed (holding the code is enough). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { CodeParams, DeleteResponse, errorResponses } from './schemas.js'

const deleteRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.delete('/delete/:code', {
    config: { crossOrigin: true },
    onRequest: app.rateLimits.lookups.onRequest,
    onSend: app.rateLimits.lookups.onSend,
    schema: { summary: 'Delete a file by its code', tags: ['delete'], params: CodeParams, response: { 200: DeleteResponse, ...errorResponses(404, 429, 500, 503) } }
  }, async (req) => {
    await app.files.remove(req.params.code)
    return { message: 'File deleted.' }
  })
}
export default deleteRoutes
