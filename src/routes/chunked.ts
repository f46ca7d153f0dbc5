/**
 * The chunked-upload endpoints of the interface. Reserved: they authenticate (401 without a
 * valid key) and answer 501 until chunked sessions are implemented.
 */
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { DropcodeError } from '../errors.js'
import { apiKeyGuard } from '../plugins/auth.js'

export default async function chunkedRoutes (app: FastifyInstance, { config }: { config: Config }) {
  const onRequest = apiKeyGuard(config.apiKeys)
  for (const path of ['/upload/start', '/upload/chunk', '/upload/verify', '/upload/complete']) {
    app.post(path, { onRequest }, async () => {
      throw new DropcodeError('DROPCODE_NOT_IMPLEMENTED', 'Chunked uploads are not available yet.')
    })
  }
}
