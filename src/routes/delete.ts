/** DELETE /delete/{code}: removes a live file; no key needed (holding the code is enough). */
import type { FastifyInstance } from 'fastify'
import { isCode } from '../ids.js'
import { FileNotFound } from '../services/files.js'
import { DeleteResponse, ErrorBody } from './schemas.js'

export default async function deleteRoutes (app: FastifyInstance) {
  app.delete('/delete/:code', {
    schema: { response: { 200: DeleteResponse, '4xx': ErrorBody, '5xx': ErrorBody } }
  }, async (req) => {
    const { code } = req.params as { code: string }
    if (!isCode(code)) throw new FileNotFound('unknown')
    await app.files.remove(code)
    return { message: 'File deleted.' }
  })
}
