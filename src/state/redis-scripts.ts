/**
 * The Lua scripts of the Redis StateStore (redis-store.ts), one per read-check-modify step, so
 * each step is atomic across instances. Key and argument layouts are given above each script.
 */
import type { Redis, Result } from 'ioredis'

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

/** Registers the scripts on a client (EVALSHA with EVAL fallback, by ioredis). */
export function defineScripts (client: Redis): void {
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
}
