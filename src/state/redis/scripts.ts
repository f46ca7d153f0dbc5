/**
 * The Lua scripts of the Redis state driver, one per read-check-modify step, so each step is
 * atomic across instances. Every script touches the keys of one hash tag only (one code, one
 * session, or one cleanup bucket), so each runs on a single Redis Cluster slot.
 *
 * Time comes from the caller (ARGV `now`, epoch ms) and every liveness check compares it with
 * a stored time (`retainUntil`, `until`, …); TTLs (PEXPIREAT on the same times) only reclaim
 * memory. Times are computed in JavaScript and passed in, never formatted by Lua.
 */
import type { Result } from 'ioredis'

// KEYS: file, claims. ARGV: now. Leaves v = {expiresAt, maxDownloads, downloads, retainUntil, blobKey}.
const STATUS = `
local now = tonumber(ARGV[1])
local v = redis.call('HMGET', KEYS[1], 'expiresAt', 'maxDownloads', 'downloads', 'retainUntil', 'blobKey')
if not v[1] or now >= tonumber(v[4]) then return 'unknown' end
if now >= tonumber(v[1]) then return 'expired' end
if tonumber(v[3]) >= tonumber(v[2]) then return 'exhausted' end
`

// Until when the object is needed (number), or false. Needs `now` and `v` (from HMGET as in STATUS).
const NEEDED = `
local function needed (now, v)
  if not v[1] or now >= tonumber(v[4]) then return false end
  if now < tonumber(v[1]) and tonumber(v[3]) < tonumber(v[2]) then return tonumber(v[4]) end
  local best = 0
  for _, c in ipairs(redis.call('HVALS', KEYS[2])) do
    if c ~= 'r' and tonumber(c) > now and tonumber(c) > best then best = tonumber(c) end
  end
  if best == 0 then return false end
  return best
end
`
const FIELDS = 'local v = redis.call(\'HMGET\', KEYS[1], \'expiresAt\', \'maxDownloads\', \'downloads\', \'retainUntil\', \'blobKey\')'

// KEYS: file, claims, served. ARGV: now, retainUntil, field, value, …
const FILE_CREATE = `
local ru = redis.call('HGET', KEYS[1], 'retainUntil')
if ru and tonumber(ru) > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1`

const FILE_LOOKUP = STATUS + 'return redis.call(\'HGETALL\', KEYS[1])'

// KEYS: file, claims, served. ARGV: now, claimId, until (capped at retainUntil). A claim id
// already present (a refund's tombstone) takes nothing. The claim is charged its file's size (its
// first response is the whole file).
const FILE_CLAIM = STATUS + `
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return 'unknown' end
redis.call('HINCRBY', KEYS[1], 'downloads', 1)
local cu = ARGV[3]
if tonumber(cu) > tonumber(v[4]) then cu = v[4] end
redis.call('HSET', KEYS[2], ARGV[2], cu)
redis.call('PEXPIREAT', KEYS[2], v[4])
redis.call('HSET', KEYS[3], ARGV[2], redis.call('HGET', KEYS[1], 'size'))
redis.call('PEXPIREAT', KEYS[3], v[4])
return redis.call('HGETALL', KEYS[1])`

// ARGV: now, claimId. A live claim is kept until the record's retention while it streams.
const FILE_RESUME = `
local ru = redis.call('HGET', KEYS[1], 'retainUntil')
if not ru or tonumber(ARGV[1]) >= tonumber(ru) then return false end
local c = redis.call('HGET', KEYS[2], ARGV[2])
if not c or c == 'r' or tonumber(c) <= tonumber(ARGV[1]) then return false end
redis.call('HSET', KEYS[2], ARGV[2], ru)
return redis.call('HGETALL', KEYS[1])`

// KEYS: file, claims, served. ARGV: now, claimId, bytes, limit. (A claim taken before claims were
// charged has no entry: it counts from 0.)
const FILE_CHARGE = `
local now = tonumber(ARGV[1])
local v = redis.call('HMGET', KEYS[1], 'retainUntil')
if not v[1] or now >= tonumber(v[1]) then return 0 end
local c = redis.call('HGET', KEYS[2], ARGV[2])
if not c or c == 'r' or tonumber(c) <= now then return 0 end
local served = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or 0) + tonumber(ARGV[3])
if served > tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[3], ARGV[2], served)
redis.call('PEXPIREAT', KEYS[3], v[1])
return 1`

// KEYS: file, claims, served. ARGV: now, claimId, keepUntil ('' ends the claim), unsent bytes
const FILE_END_CLAIM = NEEDED + `
local c = redis.call('HGET', KEYS[2], ARGV[2])
if c and c ~= 'r' then
  if ARGV[3] == '' then
    redis.call('HDEL', KEYS[2], ARGV[2])
    redis.call('HDEL', KEYS[3], ARGV[2])
  else
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
    local unsent = tonumber(ARGV[4])
    if unsent > 0 then
      local served = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or 0) - unsent
      redis.call('HSET', KEYS[3], ARGV[2], math.max(served, 0))
      redis.call('PEXPIREAT', KEYS[3], redis.call('HGET', KEYS[1], 'retainUntil'))
    end
  end
end
` + FIELDS + `
return needed(tonumber(ARGV[1]), v)`

// ARGV: now, blobKey
const FILE_NEEDED = NEEDED + FIELDS + `
if v[5] ~= ARGV[2] then return false end
return needed(tonumber(ARGV[1]), v)`

// ARGV: now, claimId. Undoes a recorded claim once; always leaves a tombstone ('r').
const FILE_REFUND = `
local ru = redis.call('HGET', KEYS[1], 'retainUntil')
if not ru then return 0 end
local c = redis.call('HGET', KEYS[2], ARGV[2])
if c == 'r' then return 0 end
if c and tonumber(redis.call('HGET', KEYS[1], 'downloads')) > 0 then redis.call('HINCRBY', KEYS[1], 'downloads', -1) end
redis.call('HSET', KEYS[2], ARGV[2], 'r')
redis.call('PEXPIREAT', KEYS[2], ru)
return 1`

// KEYS: file, claims, served. ARGV: now, blobKey, until. A record of another object is left alone;
// else whatever is there goes and a tombstone (no expiresAt: STATUS reads it as unknown) stays
// until `until`, so a create that runs later takes nothing (FILE_CREATE sees a live retainUntil).
const FILE_RETRACT = `
local v = redis.call('HMGET', KEYS[1], 'blobKey', 'retainUntil')
if v[2] and tonumber(v[2]) > tonumber(ARGV[1]) and v[1] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if tonumber(ARGV[3]) <= tonumber(ARGV[1]) then return 1 end
redis.call('HSET', KEYS[1], 'blobKey', ARGV[2], 'retainUntil', ARGV[3], 'retracted', '1')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1`

// KEYS: file, claims, served. ARGV: now
const FILE_DELETE = STATUS + `
local all = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return all`

// KEYS: bucket zset, bucket owners hash. ARGV: blobKey, deadline, owner ('' for none)
const CLEANUP_SCHEDULE = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then
  local cur = redis.call('HGET', KEYS[2], ARGV[1])
  if not cur then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  elseif not string.find(' ' .. cur .. ' ', ' ' .. ARGV[3] .. ' ', 1, true) then redis.call('HSET', KEYS[2], ARGV[1], cur .. ' ' .. ARGV[3]) end
end
return 1`

// ARGV: now, limit, leaseUntil. Returns {blobKey, owners, blobKey, owners, …}. Pending publishes
// (p:CODE) of leased keys are given up (x:CODE) in the same step.
const CLEANUP_LEASE = `
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, m in ipairs(due) do
  redis.call('ZADD', KEYS[1], ARGV[3], m)
  local owners = redis.call('HGET', KEYS[2], m) or ''
  local given = string.sub((string.gsub(' ' .. owners, ' p:', ' x:')), 2)
  if given ~= owners then redis.call('HSET', KEYS[2], m, given) end
  out[#out + 1] = m
  out[#out + 1] = given
end
return out`

// ARGV: leaseUntil, now. Keys leased until exactly leaseUntil are due again.
const CLEANUP_RELEASE = `
local keys = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[1], 'BYSCORE')
for _, m in ipairs(keys) do redis.call('ZADD', KEYS[1], ARGV[2], m) end
return #keys`

const OWNERS = `
local function owners (key)
  local t = {}
  for w in string.gmatch(redis.call('HGET', KEYS[2], key) or '', '%S+') do t[#t + 1] = w end
  return t
end
`

// KEYS: bucket zset, bucket owners hash. ARGV: blobKey, deadline, code. p:CODE → f:CODE, or 0.
const CLEANUP_CONFIRM = OWNERS + `
local list = owners(ARGV[1])
local found = false
for i, o in ipairs(list) do
  if o == 'p:' .. ARGV[3] then list[i] = 'f:' .. ARGV[3]; found = true end
end
if not found then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], table.concat(list, ' '))
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`

// KEYS: bucket zset, bucket owners hash. ARGV: blobKey, now, code. p:/f:CODE → x:CODE, due now.
const CLEANUP_ABANDON = OWNERS + `
local out = {}
for _, o in ipairs(owners(ARGV[1])) do
  if string.sub(o, 3) ~= ARGV[3] or string.sub(o, 1, 1) == 's' then out[#out + 1] = o end
end
out[#out + 1] = 'x:' .. ARGV[3]
redis.call('HSET', KEYS[2], ARGV[1], table.concat(out, ' '))
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`

const CLEANUP_FORGET = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`

// KEYS: meta, chunks, locks, done. Sets `now` and returns 'unknown' unless the session is live.
const LIVE = `
local now = tonumber(ARGV[1])
local u = redis.call('HGET', KEYS[1], 'until')
if not u or now >= tonumber(u) then return 'unknown' end
`

// KEYS: meta. ARGV: until, field, value, …
const SESSION_CREATE = `
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1`

// Refreshes the idle expiry of every session key. Needs ARGV[5] = new until.
const REFRESH = `
local function refresh (nu)
  redis.call('HSET', KEYS[1], 'until', nu)
  for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], nu) end
end
`

// A session of another key than ARGV[i] (or of none: dropcode 0.1's) is answered as unknown.
const OWNED = (i: number) => `
if redis.call('HGET', KEYS[1], 'keyId') ~= ARGV[${i}] then return 'unknown' end
`

// ARGV: now, index, token, lockUntil, newUntil, keyId. Refused: 'busy UNTIL' or 'locked UNTIL'
// (when the lease in the way runs out).
const CHUNK_BEGIN = REFRESH + LIVE + OWNED(6) + `
local st = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil')
if st[1] == 'completing' and tonumber(st[2]) > now then return 'busy ' .. st[2] end
local lock = redis.call('HGET', KEYS[3], ARGV[2])
if lock then
  local lu = string.match(lock, ' (%d+)$')
  if tonumber(lu) > now then return 'locked ' .. lu end
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3] .. ' ' .. ARGV[4])
refresh(ARGV[5])
return redis.call('HGETALL', KEYS[1])`

// KEYS: locks. ARGV: now, index, token, lockUntil
const CHUNK_EXTEND = `
local lock = redis.call('HGET', KEYS[1], ARGV[2])
if not lock then return 0 end
local tk, u = string.match(lock, '^(%S+) (%d+)$')
if tk ~= ARGV[3] or tonumber(u) <= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3] .. ' ' .. ARGV[4])
return 1`

// ARGV: now, index, token. Only the lock's own token may abort.
const CHUNK_ABORT = `
local lock = redis.call('HGET', KEYS[3], ARGV[2])
if not lock or string.match(lock, '^(%S+) ') ~= ARGV[3] then return false end
redis.call('HDEL', KEYS[3], ARGV[2])
local prev = redis.call('HGET', KEYS[2], ARGV[2])
if prev then
  redis.call('HDEL', KEYS[2], ARGV[2])
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBY', KEYS[1], 'bytes', -cjson.decode(prev).size) end
end
return prev`

// ARGV: now, index, token, record (JSON with .size), newUntil. Returns {status, received, bytes, previous}.
const CHUNK_COMMIT = REFRESH + `
local now = tonumber(ARGV[1])
local u = redis.call('HGET', KEYS[1], 'until')
if not u or now >= tonumber(u) then return {'gone'} end
local lock = redis.call('HGET', KEYS[3], ARGV[2])
if not lock then return {'lost'} end
local tk, lu = string.match(lock, '^(%S+) (%d+)$')
if tk ~= ARGV[3] or tonumber(lu) <= now then return {'lost'} end
local prev = redis.call('HGET', KEYS[2], ARGV[2])
local delta = cjson.decode(ARGV[4]).size - (prev and cjson.decode(prev).size or 0)
local bytes = redis.call('HINCRBY', KEYS[1], 'bytes', delta)
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
redis.call('HDEL', KEYS[3], ARGV[2])
refresh(ARGV[5])
return {'ok', redis.call('HLEN', KEYS[2]), bytes, prev, redis.call('HGET', KEYS[1], 'keyId') or ''}`

// ARGV: now, wanted ('' only reads)
const SESSION_LAYOUT = `
local u = redis.call('HGET', KEYS[1], 'until')
if not u or tonumber(ARGV[1]) >= tonumber(u) then return false end
if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], 'layout', ARGV[2]) end
return redis.call('HGET', KEYS[1], 'layout')`

// The idle expiry a completion moves the session to: at least newUntil (ARGV[5], its lease's
// end plus the idle TTL), so it cannot expire under a completion nor before another takes over a
// dead one. Needs REFRESH.
const HOLD_UNTIL = `
local function hold ()
  local nu = math.max(tonumber(redis.call('HGET', KEYS[1], 'until')), tonumber(ARGV[5]))
  refresh(string.format('%d', nu))
end
`

// ARGV: now, leaseUntil, keyId, token, newUntil. Busy: {'busy', until the lease in the way runs out}.
const COMPLETE_BEGIN = REFRESH + HOLD_UNTIL + `
local now = tonumber(ARGV[1])
local u = redis.call('HGET', KEYS[1], 'until')
if not u or now >= tonumber(u) then
  local d = redis.call('HMGET', KEYS[4], 'code', 'until', 'size', 'sha256', 'keyId')
  if d[1] and tonumber(d[2]) > now and d[5] == ARGV[3] then return {'done', d[1], d[3] or '', d[4] or ''} end
  return {'unknown'}
end
if redis.call('HGET', KEYS[1], 'keyId') ~= ARGV[3] then return {'unknown'} end
local st = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil')
if st[1] == 'completing' and tonumber(st[2]) > now then return {'busy', st[2]} end
local locked = 0
for _, l in ipairs(redis.call('HVALS', KEYS[3])) do
  local lu = tonumber(string.match(l, ' (%d+)$'))
  if lu > now and lu > locked then locked = lu end
end
if locked > 0 then return {'busy', string.format('%d', locked)} end
redis.call('HSET', KEYS[1], 'state', 'completing', 'leaseUntil', ARGV[2], 'completer', ARGV[4])
hold()
return {'open', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('HGET', KEYS[1], 'keyId') or ''}`

// KEYS: meta, chunks, locks. ARGV: now, leaseUntil, token, (unused), newUntil. Returns the
// session's keyId (to move its place), or false when the lease is not the token's.
const COMPLETE_EXTEND = REFRESH + HOLD_UNTIL + `
local now = tonumber(ARGV[1])
local u = redis.call('HGET', KEYS[1], 'until')
if not u or now >= tonumber(u) then return false end
local st = redis.call('HMGET', KEYS[1], 'state', 'leaseUntil', 'completer')
if st[1] ~= 'completing' or st[3] ~= ARGV[3] or tonumber(st[2]) <= now then return false end
redis.call('HSET', KEYS[1], 'leaseUntil', ARGV[2])
hold()
return redis.call('HGET', KEYS[1], 'keyId') or ''`

// ARGV: token. Only the lease's own holder releases it.
const COMPLETE_RELEASE = `
if redis.call('HGET', KEYS[1], 'completer') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'open', 'leaseUntil', 0)
  redis.call('HDEL', KEYS[1], 'completer')
end
return 1`

// ARGV: doneUntil, code, size, sha256. Returns the session's keyId ('' if none), to free its place.
// The done hash also describes the session for verify: its settings, and its chunks as
// "INDEX:SIZE:SHA256" separated by spaces (receipts dropped). A repeated finish (the session
// already gone) keeps the first one's description and key.
const SESSION_FINISH = `
local owner
if redis.call('EXISTS', KEYS[1]) == 1 then
  local m = redis.call('HMGET', KEYS[1], 'keyId', 'filename', 'totalChunks', 'maxDownloads', 'expiryHours')
  owner = m[1] or ''
  local list = {}
  local flat = redis.call('HGETALL', KEYS[2])
  for i = 1, #flat, 2 do
    local c = cjson.decode(flat[i + 1])
    list[#list + 1] = flat[i] .. ':' .. string.format('%d', c.size) .. ':' .. (c.sha256 or '')
  end
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[4], 'keyId', owner, 'filename', m[2], 'totalChunks', m[3], 'maxDownloads', m[4], 'expiryHours', m[5], 'chunks', table.concat(list, ' '))
else
  owner = redis.call('HGET', KEYS[4], 'keyId') or ''
  redis.call('HSET', KEYS[4], 'keyId', owner)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[4], 'until', ARGV[1], 'code', ARGV[2], 'size', ARGV[3], 'sha256', ARGV[4])
redis.call('PEXPIREAT', KEYS[4], ARGV[1])
return owner`

// KEYS: meta, chunks, locks. Returns the session's keyId ('' if none), to free its place.
const SESSION_REMOVE = `
local owner = redis.call('HGET', KEYS[1], 'keyId') or ''
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return owner`

// The places zset lives as long as its latest place.
const KEEP_PLACES = `
local function keep ()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', KEYS[1], last[2]) end
end
`

// KEYS: places of one key (zset: session id → until). ARGV: now, id, until, max.
// Places whose until has passed are free (their session expired, or never came).
const PLACE_RESERVE = KEEP_PLACES + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
keep()
return 1`

// KEYS: places. ARGV: id, until. Moves a held place with its session's idle expiry.
const PLACE_TOUCH = KEEP_PLACES + `
redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[2], ARGV[1])
keep()
return 1`

// ARGV: now. Returns the session's until, or false.
const SESSION_NEEDED = `
local u = redis.call('HGET', KEYS[1], 'until')
if not u or tonumber(ARGV[1]) >= tonumber(u) then return false end
return tonumber(u)`

// KEYS: counter. ARGV: now, untilIfNew. Returns {count, until}.
const COUNTER_INCR = `
local v = redis.call('HMGET', KEYS[1], 'count', 'until')
if not v[2] or tonumber(v[2]) <= tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'count', 1, 'until', ARGV[2])
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
  return {1, tonumber(ARGV[2])}
end
return {redis.call('HINCRBY', KEYS[1], 'count', 1), tonumber(v[2])}`

/** name → [number of keys, script]. Registered with defineCommand (EVALSHA, falling back to EVAL). */
export const SCRIPTS = {
  dcFileCreate: [3, FILE_CREATE],
  dcFileLookup: [2, FILE_LOOKUP],
  dcFileClaim: [3, FILE_CLAIM],
  dcFileResume: [2, FILE_RESUME],
  dcFileCharge: [3, FILE_CHARGE],
  dcFileEndClaim: [3, FILE_END_CLAIM],
  dcFileNeeded: [2, FILE_NEEDED],
  dcFileRefund: [2, FILE_REFUND],
  dcFileDelete: [3, FILE_DELETE],
  dcFileRetract: [3, FILE_RETRACT],
  dcCleanupConfirm: [2, CLEANUP_CONFIRM],
  dcCleanupRelease: [1, CLEANUP_RELEASE],
  dcCleanupAbandon: [2, CLEANUP_ABANDON],
  dcCleanupSchedule: [2, CLEANUP_SCHEDULE],
  dcCleanupLease: [2, CLEANUP_LEASE],
  dcCleanupForget: [2, CLEANUP_FORGET],
  dcSessionCreate: [1, SESSION_CREATE],
  dcChunkBegin: [3, CHUNK_BEGIN],
  dcChunkExtend: [1, CHUNK_EXTEND],
  dcChunkAbort: [3, CHUNK_ABORT],
  dcChunkCommit: [3, CHUNK_COMMIT],
  dcSessionLayout: [1, SESSION_LAYOUT],
  dcCompleteBegin: [4, COMPLETE_BEGIN],
  dcCompleteExtend: [3, COMPLETE_EXTEND],
  dcCompleteRelease: [1, COMPLETE_RELEASE],
  dcSessionFinish: [4, SESSION_FINISH],
  dcSessionRemove: [3, SESSION_REMOVE],
  dcPlaceReserve: [1, PLACE_RESERVE],
  dcPlaceTouch: [1, PLACE_TOUCH],
  dcSessionNeeded: [1, SESSION_NEEDED],
  dcCounterIncr: [1, COUNTER_INCR]
} as const satisfies Record<string, readonly [number, string]>

export type Arg = string | number
type Flat = string[]

declare module 'ioredis' {
  interface RedisCommander<Context> {
    dcFileCreate (file: string, claims: string, served: string, ...args: Arg[]): Result<number, Context>
    dcFileLookup (file: string, claims: string, now: number): Result<string | Flat, Context>
    dcFileClaim (file: string, claims: string, served: string, now: number, claimId: string, resumeUntil: number): Result<string | Flat, Context>
    dcFileResume (file: string, claims: string, now: number, claimId: string): Result<Flat | null, Context>
    dcFileCharge (file: string, claims: string, served: string, now: number, claimId: string, bytes: number, limit: number): Result<number, Context>
    dcFileEndClaim (file: string, claims: string, served: string, now: number, claimId: string, keepUntil: number | '', unsent: number): Result<number | null, Context>
    dcFileNeeded (file: string, claims: string, now: number, blobKey: string): Result<number | null, Context>
    dcFileRefund (file: string, claims: string, now: number, claimId: string): Result<number, Context>
    dcFileDelete (file: string, claims: string, served: string, now: number): Result<string | Flat, Context>
    dcFileRetract (file: string, claims: string, served: string, now: number, blobKey: string, until: number): Result<number, Context>
    dcCleanupRelease (bucket: string, leaseUntil: number, now: number): Result<number, Context>
    dcCleanupConfirm (bucket: string, owners: string, blobKey: string, deadline: number, code: string): Result<number, Context>
    dcCleanupAbandon (bucket: string, owners: string, blobKey: string, now: number, code: string): Result<number, Context>
    dcCleanupSchedule (bucket: string, owners: string, blobKey: string, deadline: number, owner: string): Result<number, Context>
    dcCleanupLease (bucket: string, owners: string, now: number, limit: number, leaseUntil: number): Result<Flat, Context>
    dcCleanupForget (bucket: string, owners: string, blobKey: string): Result<number, Context>
    dcSessionCreate (meta: string, until: number, ...fields: Arg[]): Result<number, Context>
    dcChunkBegin (meta: string, chunks: string, locks: string, now: number, index: number, token: string, lockUntil: number, newUntil: number, keyId: string): Result<string | Flat, Context>
    dcChunkExtend (locks: string, now: number, index: number, token: string, lockUntil: number): Result<number, Context>
    dcChunkAbort (meta: string, chunks: string, locks: string, now: number, index: number, token: string): Result<string | null, Context>
    dcChunkCommit (meta: string, chunks: string, locks: string, now: number, index: number, token: string, record: string, newUntil: number): Result<[string, number?, number?, (string | null)?, string?], Context>
    dcSessionLayout (meta: string, now: number, wanted: string): Result<string | null, Context>
    dcCompleteBegin (meta: string, chunks: string, locks: string, done: string, now: number, leaseUntil: number, keyId: string, token: string, newUntil: number): Result<[string, (string | Flat)?, (string | Flat)?, string?], Context>
    dcCompleteExtend (meta: string, chunks: string, locks: string, now: number, leaseUntil: number, token: string, unused: string, newUntil: number): Result<string | null, Context>
    dcCompleteRelease (meta: string, token: string): Result<number, Context>
    dcSessionFinish (meta: string, chunks: string, locks: string, done: string, doneUntil: number, code: string, size: number | '', sha256: string): Result<string, Context>
    dcSessionRemove (meta: string, chunks: string, locks: string): Result<string, Context>
    dcPlaceReserve (places: string, now: number, id: string, until: number, max: number): Result<number, Context>
    dcPlaceTouch (places: string, id: string, until: number): Result<number, Context>
    dcSessionNeeded (meta: string, now: number): Result<number | null, Context>
    dcCounterIncr (key: string, now: number, untilIfNew: number): Result<[number, number], Context>
  }
}
