/**
 * GET /limits: the upload limits of this service, public (no key), so a client can refuse a
 * file that is too large before sending a byte and offer only valid settings (the web page does
 * both). It reveals configuration only, nothing about stored files. `chunks_in_flight` is a hint
 * the CLI follows when not told `--parallel` (measured in docs/performance.md: on fs, 1 GiB in
 * 8 MiB chunks costs the service 4.7 s of CPU with 1 in flight and 7.1 s with 4, and took
 * 6.3-7.0 s against 7.1-7.5 s; on S3, 13-15.7 s with 1 and 10.3-11.9 s with 4).
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
    default_expiry_hours: DEFAULT_EXPIRY_HOURS,
    chunks_in_flight: config.storage.driver === 'fs' ? 1 : 4
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
