/**
 * Connects the Redis state driver (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): builds
 * its ioredis client, waits for it at start (a StartupError naming the setting when Redis cannot
 * be reached), and hands back the backend over it with the readiness check and `close` that fit
 * the mode.
 */
import { Cluster, Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import { describeRedis, type RedisConnection } from '../../config.js'
import { DropcodeError, StartupError } from '../../core/errors.js'
import type { StateBackend } from '../types.js'
import { createRedisBackend } from './index.js'

/**
 * Shared by every mode: while Redis is unreachable, commands fail at once (503) instead of
 * queueing and hanging the request; the client keeps reconnecting in the background.
 */
const FAIL_FAST = {
  maxRetriesPerRequest: 1,
  connectTimeout: 2000,
  // A command with no reply after this fails (503), but it may still run: it sits in the
  // socket of a paused or slow Redis. Download claims are refunded by id for that reason
  // (services/refunds.ts).
  commandTimeout: 5000,
  // Not replayed after a reconnect: its caller has usually failed the request by then.
  autoResendUnfulfilledCommands: false
} as const
/** ms start-up waits for Redis before it stops with a message. */
const STARTUP_TIMEOUT_MS = 5000
const retry = (times: number) => Math.min(times * 100, 2000)

/** A client for one Redis (REDIS_URL), or for the master that Sentinels name. */
export function createRedisClient (c: string | Exclude<RedisConnection, { mode: 'cluster' }>): Redis {
  const conn = typeof c === 'string' ? { mode: 'single' as const, url: c } : c
  const options = { ...FAIL_FAST, enableOfflineQueue: false, retryStrategy: retry, lazyConnect: true }
  if (conn.mode === 'single') return new Redis(conn.url, options)
  return new Redis({
    ...options,
    sentinels: conn.sentinels,
    name: conn.name,
    ...(conn.password !== undefined ? { password: conn.password } : {}),
    // After a failover the old master comes back as a replica: a write that reaches it answers
    // READONLY; reconnecting asks the Sentinels again and finds the new master.
    reconnectOnError: (err: Error) => err.message.startsWith('READONLY')
  })
}

/**
 * A Redis Cluster client. No ioredis `keyPrefix`: the driver writes `{REDIS_PREFIX}file:{CODE}`
 * itself, so the braces (the hash tag) alone choose the slot, whatever the prefix.
 */
export function createClusterClient (c: Extract<RedisConnection, { mode: 'cluster' }>): Cluster {
  return new Cluster(c.nodes, {
    enableOfflineQueue: false,
    clusterRetryStrategy: retry,
    lazyConnect: true,
    slotsRefreshTimeout: 2000,
    redisOptions: { ...FAIL_FAST, ...(c.password !== undefined ? { password: c.password } : {}) }
  })
}

export async function connectRedisBackend (conn: RedisConnection, prefix: string, log: FastifyBaseLogger): Promise<StateBackend> {
  const client = conn.mode === 'cluster' ? createClusterClient(conn) : createRedisClient(conn)
  let lastReport = 0
  let lastError: Error | undefined
  let connected = false
  client.on('error', (err: Error) => {
    lastError = err
    if (!connected) return // a failed start is reported once, as a StartupError
    // One report per 10 s while Redis is down, not one per reconnect attempt.
    if (Date.now() - lastReport < 10_000) return
    lastReport = Date.now()
    log.warn({ err }, 'state store connection error')
  })
  try {
    // A client that keeps retrying (all Sentinels unreachable, a cluster without its slots)
    // never rejects connect(): give up after a while, naming the last error.
    let timer: NodeJS.Timeout | undefined
    await Promise.race([client.connect(), new Promise((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS)
    })]).finally(() => clearTimeout(timer))
    connected = true
  } catch (err) {
    client.disconnect()
    const { where, setting } = describeRedis(conn)
    const why = (lastError as NodeJS.ErrnoException | undefined)?.code ?? lastError?.message ?? (err as Error).message
    throw new StartupError(`cannot reach ${where} (${setting}): ${why}`,
      `start Redis there, fix ${setting}, or unset ${setting} and STATE_DRIVER to keep the state under DATA_DIR`, { cause: err })
  }
  if (client instanceof Cluster) {
    const backend = createRedisBackend({ client, prefix })
    return {
      ...backend,
      // Ready only when the master of every slot answers: each holds a share of the codes and
      // sessions. Asked by the slot map, not the connection pool: the client drops a dead
      // master's connection from its pool while the slot map still names it.
      async ping () {
        try {
          const masters = new Map(client.nodes('master').map(n => [`${n.options.host ?? ''}:${n.options.port ?? ''}`, n]))
          const owners = new Set(client.slots.map(nodes => nodes[0]).filter(key => key !== undefined))
          if (owners.size === 0) throw new Error('no slot map')
          await Promise.all([...owners].map(async key => {
            const node = masters.get(key)
            if (node === undefined) throw new Error(`no connection to the master at ${key}`)
            await node.ping()
          }))
        } catch (err) {
          throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: err })
        }
      },
      close: async () => { await client.quit().catch(() => client.disconnect()) }
    }
  }
  const backend = createRedisBackend({ client, prefix })
  return { ...backend, close: async () => { await client.quit().catch(() => client.disconnect()) } }
}
