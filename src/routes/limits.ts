/**
 * GET /limits: the upload limits of this service, public (no key), so a client can refuse a
 * file that is too large before sending a byte and offer only valid settings (the web page does
 * both). It reveals configuration only, nothing about stored files.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../config.js'
import { DEFAULT_EXPIRY_HOURS, DEFAULT_MAX_DOWNLOADS, LimitsResponse } from './schemas.js'

const limitsRoutes: FastifyPluginAsyncTypebox<{ config: Config }> = async (app, { config }) => {
  const { limits } = config
  const body = {
    max_file_size: limits.maxFileSize,
    max_chunk_size: limits.maxChunkSize,
    max_total_chunks: limits.maxTotalChunks,
    max_downloads: limits.maxDownloads,
    max_expiry_hours: limits.maxExpiryHours,
    default_max_downloads: DEFAULT_MAX_DOWNLOADS,
    default_expiry_hours: DEFAULT_EXPIRY_HOURS
  }
  app.get('/limits', {
    schema: { summary: 'Upload limits and defaults (public)', tags: ['web'], response: { 200: LimitsResponse } }
  }, async (_req, reply) => {
    // Limits change only with a restart; revalidating costs one small request.
    reply.header('cache-control', 'no-cache')
    return body
  })
}
export default limitsRoutes
