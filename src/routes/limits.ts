/**
 * GET /limits: the upload limits of this service, public (no key), so a client can refuse a
 * file that is too large before sending a byte and offer only valid settings (the web page does
 * both). It reveals configuration only, nothing about stored files. `chunks_in_flight` and
 * `chunk_size` are hints the CLI follows when not told `--parallel` or `--chunk-size` (measured in
 * docs/performance.md: on fs, 1 GiB in 8 MiB chunks costs the service 4.7 s of CPU with 1 in
 * flight and 7.1 s with 4, and took 6.3-7.0 s against 7.1-7.5 s; on S3, 13-15.7 s with 1 and
 * 10.3-11.9 s with 4; on fs, 64 MiB chunks took 4.3-4.4 s where 8 MiB chunks took 5.2-5.5 s,
 * each chunk costing the service about 8 ms besides its bytes).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../config.js'
import { DEFAULT_EXPIRY_HOURS, DEFAULT_MAX_DOWNLOADS, LimitsResponse } from './schemas.js'

/** The chunk size suggested on the filesystem: few chunks, each written in place (bytes). */
const FS_CHUNK_SIZE = 64 * 1024 * 1024

const limitsRoutes: FastifyPluginAsyncTypebox<{ config: Pick<Config, 'limits' | 'storage'> }> = async (app, { config }) => {
  const { limits } = config
  const body = {
    max_file_size: limits.maxFileSize,
    max_chunk_size: limits.maxChunkSize,
    max_total_chunks: limits.maxTotalChunks,
    max_downloads: limits.maxDownloads,
    max_expiry_hours: limits.maxExpiryHours,
    default_max_downloads: DEFAULT_MAX_DOWNLOADS,
    default_expiry_hours: DEFAULT_EXPIRY_HOURS,
    chunks_in_flight: config.storage.driver === 'fs' ? 1 : 4,
    // On S3 each chunk is one part held in the service's part memory: the part size it uses itself.
    chunk_size: Math.min(limits.maxChunkSize, config.storage.driver === 'fs' ? FS_CHUNK_SIZE : config.storage.partSize)
  }
  app.get('/limits', {
    config: { crossOrigin: true },
    schema: { summary: 'Upload limits and defaults (public)', tags: ['web'], response: { 200: LimitsResponse } }
  }, async (_req, reply) => {
    // Limits change only with a restart; revalidating costs one small request.
    reply.header('cache-control', 'no-cache')
    return body
  })
}
export default limitsRoutes
