/**
 * The one place that picks a state driver (STATE_DRIVER): the embedded LMDB database
 * (lmdb/index.ts) or Redis (redis/connect.ts builds its client). Nothing else branches on the
 * backend.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { StateConfig } from '../config.js'
import { StartupError } from '../core/errors.js'
import { openLmdbBackend } from './lmdb/index.js'
import { connectRedisBackend } from './redis/connect.js'
import type { StateBackend } from './types.js'

export type * from './types.js'
export { createClusterClient, createRedisClient } from './redis/connect.js'

export interface OpenStateOptions {
  /** Clock (epoch ms) for the embedded driver's housekeeping. */
  now: () => number
  log: FastifyBaseLogger
}

export async function openState (config: StateConfig, options: OpenStateOptions): Promise<StateBackend> {
  if (config.driver === 'redis') return await connectRedisBackend(config.redis, config.prefix, options.log)
  try {
    return await openLmdbBackend({ dir: config.dir, maxRecords: config.maxRecords, now: options.now, log: options.log })
  } catch (err) {
    throw new StartupError(`cannot open the state database under ${config.dir} (DATA_DIR): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      'make DATA_DIR writable by this user, or point DATA_DIR elsewhere', { cause: err })
  }
}
