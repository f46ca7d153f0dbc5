/**
 * Redis StateStore.
 *
 * Key layout (prefix from REDIS_PREFIX, default `dropcode:`):
 *   {prefix}file:{code}   hash  code, blobKey, filename, contentType, size, maxDownloads,
 *                               downloads, createdAt, expiresAt; PEXPIREAT expiresAt
 *   {prefix}blobs         zset  member = object key, score = cleanup deadline (epoch ms)
 *   {prefix}session:{id}         hash  session fields + state (open|completing) + leaseUntil
 *   {prefix}session:{id}:chunks  hash  chunk index → receipt (BlobStore JSON)
 *   {prefix}session:{id}:locks   hash  chunk index → lock expiry (epoch ms) while uploading
 *   {prefix}done:{id}            string  code of a completed session (answers repeated completes)
 *   {prefix}rl:{name}            string  rate-limit counter; PEXPIRE set by its first INCR
 *   Session keys share one idle TTL (PEXPIRE), refreshed by every chunk; the session's object
 *   key is re-scored in `blobs` at the same time, so an abandoned session is swept.
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
import type { Claim, FileRecord, Lookup, StateStore, Unavailable, UploadSession } from './state-store.js'

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

const SESSION_CREATE = `
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1`

// KEYS: meta, chunks, locks, blobs. ARGV: now, index, lockUntil, ttl, blobDeadline
const CHUNK_BEGIN = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
local st = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil', 'blobKey')
if st[1] == 'completing' and tonumber(st[2]) > tonumber(ARGV[1]) then return 'busy' end
local lock = redis.call('HGET', KEYS[3], ARGV[2])
if lock and tonumber(lock) > tonumber(ARGV[1]) then return 'locked' end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
redis.call('ZADD', KEYS[4], ARGV[5], st[3])
return redis.call('HGETALL', KEYS[1])`

const CHUNK_EXTEND = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1`

// KEYS: meta, chunks, locks, blobs. ARGV: index, receipt, ttl, blobDeadline
const CHUNK_COMMIT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
local delta = cjson.decode(ARGV[2]).size - (prev and cjson.decode(prev).size or 0)
local bytes = redis.call('HINCRBY', KEYS[1], 'bytes', delta)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[1])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
redis.call('ZADD', KEYS[4], ARGV[4], redis.call('HGET', KEYS[1], 'blobKey'))
return {1, redis.call('HLEN', KEYS[2]), bytes, prev}`

// KEYS: meta, chunks, locks. ARGV: index
const CHUNK_ABORT = `
redis.call('HDEL', KEYS[3], ARGV[1])
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'bytes', -cjson.decode(prev).size)
end
return prev`

const LAYOUT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[1] ~= '' then redis.call('HSETNX', KEYS[1], 'layout', ARGV[1]) end
return redis.call('HGET', KEYS[1], 'layout')`

// KEYS: meta, chunks, locks, done. ARGV: now, leaseUntil
const COMPLETE_BEGIN = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  local code = redis.call('GET', KEYS[4])
  if code then return {'done', code} end
  return {'unknown'}
end
local st = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil')
if st[1] == 'completing' and tonumber(st[2]) > tonumber(ARGV[1]) then return {'busy'} end
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  if tonumber(v) > tonumber(ARGV[1]) then return {'busy'} end
end
redis.call('HSET', KEYS[1], 'state', 'completing', 'leaseUntil', ARGV[2])
return {'open', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}`

const COMPLETE_RELEASE = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'state', 'open') end
return 1`

// KEYS: meta, chunks, locks, done. ARGV: code, doneTtl
const COMPLETE_FINISH = `
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[2])
return 1`

const HIT = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {c, redis.call('PTTL', KEYS[1])}`

declare module 'ioredis' {
  interface RedisCommander<Context> {
    dcCreate (file: string, blobs: string, ...args: Array<string | number>): Result<number, Context>
    dcLookup (file: string, now: number): Result<string | string[], Context>
    dcClaim (file: string, now: number): Result<string | string[], Context>
    dcDelete (file: string, blobs: string, now: number): Result<string | string[], Context>
    dcRefund (file: string): Result<number, Context>
    dcLease (blobs: string, now: number, limit: number, leaseUntil: number): Result<string[], Context>
    dcSessionCreate (meta: string, blobs: string, ...args: Array<string | number>): Result<number, Context>
    dcChunkBegin (meta: string, chunks: string, locks: string, blobs: string, now: number, index: number, lockUntil: number, ttl: number, deadline: number): Result<string | string[], Context>
    dcChunkExtend (locks: string, index: number, lockUntil: number): Result<number, Context>
    dcChunkCommit (meta: string, chunks: string, locks: string, blobs: string, index: number, receipt: string, ttl: number, deadline: number): Result<[number, number?, number?, (string | null)?], Context>
    dcChunkAbort (meta: string, chunks: string, locks: string, index: number): Result<string | null, Context>
    dcLayout (meta: string, wanted: string): Result<string | null, Context>
    dcCompleteBegin (meta: string, chunks: string, locks: string, done: string, now: number, leaseUntil: number): Result<[string, (string | string[])?, string[]?], Context>
    dcCompleteRelease (meta: string): Result<number, Context>
    dcHit (key: string, windowMs: number): Result<[number, number], Context>
    dcCompleteFinish (meta: string, chunks: string, locks: string, done: string, code: string, ttl: number): Result<number, Context>
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

const SESSION_FIELDS = ['id', 'blobKey', 'handle', 'filename', 'totalChunks', 'maxDownloads', 'expiryHours', 'createdAt'] as const
const SESSION_NUMERIC = new Set(['totalChunks', 'maxDownloads', 'expiryHours', 'createdAt'])

function toSession (flat: string[]): UploadSession {
  const out: Record<string, string | number> = {}
  for (let i = 0; i < flat.length; i += 2) {
    const k = flat[i]!
    if (k === 'state' || k === 'leaseUntil' || k === 'bytes') continue
    out[k] = SESSION_NUMERIC.has(k) ? Number(flat[i + 1]) : flat[i + 1]!
  }
  return out as unknown as UploadSession
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
  client.defineCommand('dcSessionCreate', { numberOfKeys: 2, lua: SESSION_CREATE })
  client.defineCommand('dcChunkBegin', { numberOfKeys: 4, lua: CHUNK_BEGIN })
  client.defineCommand('dcChunkExtend', { numberOfKeys: 1, lua: CHUNK_EXTEND })
  client.defineCommand('dcChunkCommit', { numberOfKeys: 4, lua: CHUNK_COMMIT })
  client.defineCommand('dcChunkAbort', { numberOfKeys: 3, lua: CHUNK_ABORT })
  client.defineCommand('dcLayout', { numberOfKeys: 1, lua: LAYOUT })
  client.defineCommand('dcCompleteBegin', { numberOfKeys: 4, lua: COMPLETE_BEGIN })
  client.defineCommand('dcCompleteRelease', { numberOfKeys: 1, lua: COMPLETE_RELEASE })
  client.defineCommand('dcCompleteFinish', { numberOfKeys: 4, lua: COMPLETE_FINISH })
  client.defineCommand('dcHit', { numberOfKeys: 1, lua: HIT })

  const fileKey = (code: string) => `${prefix}file:${code}`
  const blobsKey = `${prefix}blobs`
  const sessionKeys = (id: string) => [`${prefix}session:${id}`, `${prefix}session:${id}:chunks`, `${prefix}session:${id}:locks`] as const
  const doneKey = (id: string) => `${prefix}done:${id}`

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
    async createSession (session, timing) {
      const flat = SESSION_FIELDS.flatMap(f => [f, String(session[f])])
      if (session.layout !== undefined) flat.push('layout', session.layout)
      flat.push('state', 'open')
      await guard(() => client.dcSessionCreate(sessionKeys(session.id)[0], blobsKey, timing.ttlMs, timing.blobDeadline, session.blobKey, ...flat))
    },
    async getSession (id) {
      const [meta, chunks] = sessionKeys(id)
      const [[, flat], [, indexes]] = await guard(async () => (await client.multi().hgetall(meta).hkeys(chunks).exec())!) as [[unknown, Record<string, string>], [unknown, string[]]]
      if (Object.keys(flat).length === 0) return null
      return { session: toSession(Object.entries(flat).flat()), received: indexes.map(Number).sort((a, b) => a - b) }
    },
    async beginChunk (id, index, lockUntil, timing) {
      const reply = await guard(() => client.dcChunkBegin(...sessionKeys(id), blobsKey, timing.now, index, lockUntil, timing.ttlMs, timing.blobDeadline))
      return typeof reply === 'string' ? { ok: false, reason: reply as 'unknown' | 'busy' | 'locked' } : { ok: true, session: toSession(reply) }
    },
    async extendChunkLock (id, index, lockUntil) {
      await guard(() => client.dcChunkExtend(sessionKeys(id)[2], index, lockUntil))
    },
    async abortChunk (id, index) {
      return await guard(() => client.dcChunkAbort(...sessionKeys(id), index))
    },
    async commitChunk (id, index, receipt, timing) {
      const [ok, received, bytes, previous] = await guard(() => client.dcChunkCommit(...sessionKeys(id), blobsKey, index, receipt, timing.ttlMs, timing.blobDeadline))
      return ok === 1 ? { received: received!, bytes: bytes!, previous: previous ?? null } : null
    },
    async settleLayout (id, wanted) {
      return (await guard(() => client.dcLayout(sessionKeys(id)[0], wanted ?? ''))) ?? undefined
    },
    async beginCompletion (id, now, leaseUntil) {
      const [status, a, b] = await guard(() => client.dcCompleteBegin(...sessionKeys(id), doneKey(id), now, leaseUntil))
      if (status === 'done') return { status, code: a as string }
      if (status !== 'open') return { status: status as 'unknown' | 'busy' }
      const receipts = new Map<number, string>()
      for (let i = 0; i < b!.length; i += 2) receipts.set(Number(b![i]), b![i + 1]!)
      return { status, session: toSession(a as string[]), receipts }
    },
    async releaseCompletion (id) {
      await guard(() => client.dcCompleteRelease(sessionKeys(id)[0]))
    },
    async finishSession (id, code, doneTtlMs) {
      await guard(() => client.dcCompleteFinish(...sessionKeys(id), doneKey(id), code, doneTtlMs))
    },
    async hitCounter (key, windowMs) {
      const [count, resetMs] = await guard(() => client.dcHit(`${prefix}rl:${key}`, windowMs))
      return { count, resetMs: Math.max(resetMs, 0) }
    },
    async peekCounter (key) {
      const [[, count], [, ttl]] = await guard(async () => (await client.multi().get(`${prefix}rl:${key}`).pttl(`${prefix}rl:${key}`).exec())!) as [[unknown, string | null], [unknown, number]]
      return { count: Number(count ?? 0), resetMs: Math.max(ttl, 0) }
    },
    async ping () {
      await guard(() => client.ping())
    },
    async close () {}
  }
}
