/**
 * Redis StateStore.
 *
 * Key layout (prefix from REDIS_PREFIX, default `dropcode:`):
 *   {prefix}file:{code}   hash  code, blobKey, filename, contentType, size, maxDownloads,
 *                               downloads, createdAt, expiresAt; PEXPIREAT expiresAt
 *   {prefix}blobs         zset  member = object key, score = cleanup deadline (epoch ms)
 *
 * Atomicity: every read-check-modify is one Lua script, so it is atomic across instances:
 * create (EXISTS + HSET + PEXPIREAT + ZADD), claim (expiry and limit check + HINCRBY), delete
 * (check + DEL + ZADD due-now) and the sweeper's lease (ZRANGE BYSCORE + ZADD). A record and its
 * TTL are written in one step, so no record ever lives without an expiry. Times come from the
 * calling instance's clock (`now`), which is also what the TTL is computed from; keep instance
 * clocks in sync (NTP), as any expiry-based service must.
 *
 * Scripts touch `file:*` and `blobs` together, so Redis Cluster (keys in different slots) is
 * not supported; a single primary (with replicas / Sentinel) is.
 *
 * Failures: a connection error or timeout surfaces as DROPCODE_STATE_UNAVAILABLE (503); ioredis
 * is set not to queue commands while disconnected, so requests fail fast instead of hanging.
 */
import type { Redis, Result } from 'ioredis'
import { DropcodeError } from '../errors.js'
import type { Claim, FileRecord, Lookup, StateStore, Unavailable } from './state-store.js'

const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
return 1`

// Returns {status} or {'ok', field, value, …}. Expiry is checked against the caller's clock as
// well as the TTL, so a record is never served after expiresAt even if Redis has not evicted it.
const STATUS = `
local v = redis.call('HMGET', KEYS[1], 'expiresAt', 'maxDownloads', 'downloads')
if not v[1] then return 'unknown' end
if tonumber(ARGV[1]) >= tonumber(v[1]) then return 'expired' end
if tonumber(v[3]) >= tonumber(v[2]) then return 'exhausted' end
`
const LOOKUP = STATUS + 'return redis.call(\'HGETALL\', KEYS[1])'
const CLAIM = STATUS + `
redis.call('HINCRBY', KEYS[1], 'downloads', 1)
return redis.call('HGETALL', KEYS[1])`
const DELETE = STATUS + `
local all = redis.call('HGETALL', KEYS[1])
redis.call('ZADD', KEYS[2], ARGV[1], redis.call('HGET', KEYS[1], 'blobKey'))
redis.call('DEL', KEYS[1])
return all`
const REFUND = `
local d = redis.call('HGET', KEYS[1], 'downloads')
if d and tonumber(d) > 0 then redis.call('HINCRBY', KEYS[1], 'downloads', -1) end
return 1`
const LEASE = `
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[3], m) end
return due`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    dcCreate (file: string, blobs: string, ...args: Array<string | number>): Result<number, Context>
    dcLookup (file: string, now: number): Result<string | string[], Context>
    dcClaim (file: string, now: number): Result<string | string[], Context>
    dcDelete (file: string, blobs: string, now: number): Result<string | string[], Context>
    dcRefund (file: string): Result<number, Context>
    dcLease (blobs: string, now: number, limit: number, leaseUntil: number): Result<string[], Context>
  }
}

const FIELDS = ['code', 'blobKey', 'filename', 'contentType', 'size', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt'] as const
const NUMERIC = new Set(['size', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt'])

function toRecord (flat: string[]): FileRecord {
  const out: Record<string, string | number> = {}
  for (let i = 0; i < flat.length; i += 2) {
    const k = flat[i]!
    out[k] = NUMERIC.has(k) ? Number(flat[i + 1]) : flat[i + 1]!
  }
  return out as unknown as FileRecord
}

function toLookup (reply: string | string[]): Lookup {
  return typeof reply === 'string' ? { ok: false, reason: reply as Unavailable } : { ok: true, file: toRecord(reply) }
}

/** Wraps a command so connection trouble becomes a 503 with the cause kept for the log. */
async function guard<T> (op: () => Promise<T>): Promise<T> {
  try {
    return await op()
  } catch (err) {
    throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: err })
  }
}

export interface RedisStateStoreOptions {
  /** A connected (or connecting) client; the store does not close it. */
  client: Redis
  /** Prepended to every key, e.g. `dropcode:`. */
  prefix: string
}

export function createRedisStateStore ({ client, prefix }: RedisStateStoreOptions): StateStore {
  client.defineCommand('dcCreate', { numberOfKeys: 2, lua: CREATE })
  client.defineCommand('dcLookup', { numberOfKeys: 1, lua: LOOKUP })
  client.defineCommand('dcClaim', { numberOfKeys: 1, lua: CLAIM })
  client.defineCommand('dcDelete', { numberOfKeys: 2, lua: DELETE })
  client.defineCommand('dcRefund', { numberOfKeys: 1, lua: REFUND })
  client.defineCommand('dcLease', { numberOfKeys: 1, lua: LEASE })

  const fileKey = (code: string) => `${prefix}file:${code}`
  const blobsKey = `${prefix}blobs`

  return {
    async createFile (file, blobDeadline) {
      const flat = FIELDS.flatMap(f => [f, String(file[f])])
      return await guard(async () =>
        (await client.dcCreate(fileKey(file.code), blobsKey, file.expiresAt, file.blobKey, blobDeadline, ...flat)) === 1)
    },
    async lookupFile (code, now) {
      return toLookup(await guard(() => client.dcLookup(fileKey(code), now)))
    },
    async claimDownload (code, now): Promise<Claim> {
      const result = toLookup(await guard(() => client.dcClaim(fileKey(code), now)))
      return result.ok ? { ...result, last: result.file.downloads >= result.file.maxDownloads } : result
    },
    async refundDownload (code) {
      await guard(() => client.dcRefund(fileKey(code)))
    },
    async deleteFile (code, now) {
      return toLookup(await guard(() => client.dcDelete(fileKey(code), blobsKey, now)))
    },
    async scheduleBlobCleanup (blobKey, deadline) {
      await guard(() => client.zadd(blobsKey, deadline, blobKey))
    },
    async leaseDueBlobs (now, limit, leaseUntil) {
      return await guard(() => client.dcLease(blobsKey, now, limit, leaseUntil))
    },
    async forgetBlob (blobKey) {
      await guard(() => client.zrem(blobsKey, blobKey))
    },
    async countDueBlobs (now) {
      return await guard(() => client.zcount(blobsKey, '-inf', now))
    },
    async ping () {
      await guard(() => client.ping())
    },
    async close () {}
  }
}
