/**
 * The one place that picks a StateStore driver (STATE_DRIVER). It builds the driver's client
 * and hands back a `close` for it; nothing else branches on the backend.
 */
import { Redis } from 'ioredis'
import type { StateConfig } from '../config.js'
import { openLocalStateStore } from './local-store.js'
import { createRedisStateStore } from './redis-store.js'
import type { StateStore } from './state-store.js'

export type * from './state-store.js'

/** Builds a Redis client that fails fast instead of queueing commands while disconnected. */
export function createRedisClient (url: string): Redis {
  return new Redis(url, {
    // While Redis is down, commands fail at once (503) instead of hanging the request;
    // the client keeps reconnecting in the background and requests recover by themselves.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 5000,
    retryStrategy: times => Math.min(times * 100, 2000),
    lazyConnect: true
  })
}

export interface OpenedStateStore {
  store: StateStore
  close (): Promise<void>
}

export interface OpenStateOptions {
  now?: () => number
  /** Told about connection errors (the client keeps reconnecting; requests answer 503 meanwhile). */
  onConnectionError?: (err: Error) => void
}

export async function openStateStore (config: StateConfig, options: OpenStateOptions = {}): Promise<OpenedStateStore> {
  if (config.driver === 'redis') {
    const client = createRedisClient(config.url)
    let lastReport = 0
    client.on('error', (err: Error) => {
      // One report per 10 s while Redis is down, not one per reconnect attempt.
      if (Date.now() - lastReport < 10_000) return
      lastReport = Date.now()
      options.onConnectionError?.(err)
    })
    await client.connect()
    const store = createRedisStateStore({ client, prefix: config.prefix })
    return { store, close: async () => { await client.quit().catch(() => client.disconnect()) } }
  }
  const store = await openLocalStateStore({ dir: config.dir, maxRecords: config.maxRecords, ...(options.now ? { now: options.now } : {}) })
  return { store, close: () => store.close() }
}
