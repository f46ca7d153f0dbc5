/**
 * The Lua scripts of the Redis KeyStore (see index.ts for the key layout): the key records and
 * their secret hashes under one hash tag (`{keys}`), and each key name's ledger under its own
 * (`{u:NAME}`), so every script runs on one Redis Cluster slot. Time comes from the caller (ARGV
 * `now`, epoch ms), as in scripts.ts.
 */
import type { Result } from 'ioredis'
import type { Arg } from './scripts.js'

// KEYS: keys, hashes. ARGV: name, record JSON, hash, … Nothing is written when the name or a
// hash is taken.
const KEY_CREATE = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
for i = 3, #ARGV do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 1 then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
for i = 3, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], ARGV[1]) end
return 1`

// KEYS: keys, hashes. ARGV: hash. The record JSON of the key the hash maps to (the caller checks
// that it still opens it), or false.
const KEY_FIND = `
local name = redis.call('HGET', KEYS[2], ARGV[1])
if not name then return false end
return redis.call('HGET', KEYS[1], name)`

// KEYS: keys, hashes. ARGV: name, record JSON the rotation was computed from, new record JSON,
// new hash, forgotten hash, … The caller computes the rotation (key-rules.ts: no JSON is re-encoded
// in Lua, whose number formatting would round large numbers); this writes it only if the record
// is still the one it read, else answers 'retry'.
const KEY_ROTATE = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 'gone' end
if current ~= ARGV[2] then return 'retry' end
if redis.call('HEXISTS', KEYS[2], ARGV[4]) == 1 then return 'taken' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
for i = 5, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[2], ARGV[i]) end
end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[1])
return 'ok'`

// KEYS: keys, hashes. ARGV: name. Removes the record and the hashes that map to it.
const KEY_REVOKE = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
for hash in pairs(cjson.decode(current).secrets) do
  if redis.call('HGET', KEYS[2], hash) == ARGV[1] then redis.call('HDEL', KEYS[2], hash) end
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1`

// A ledger's bytes (meta 'used'). The items hash and the ends zset expire together at their
// latest end, when every item has ended: with the zset gone, nothing counts any more.
const LEDGER_USED = `
local function usedOf (stored)
  if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
  return tonumber(stored or 0)
end
`

// KEYS: items (hash item → bytes), ends (zset item → until), meta (hash used, lastUsedAt).
// ARGV: now, quota ('' for none), upTo ('1' or ''), item ('' for no add), bytes, until, dropped
// item, … Returns {ok (1/0), added, used}. Ended items go first, whatever the answer; a refused
// change changes nothing else. Numbers are written with %d: Lua's own formatting of a number
// keeps 14 digits.
const LEDGER_ACCOUNT = LEDGER_USED + `
local now = tonumber(ARGV[1])
local function int (n) return string.format('%d', n) end
local used = usedOf(redis.call('HGET', KEYS[3], 'used'))
for _, item in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  used = used - tonumber(redis.call('HGET', KEYS[1], item) or 0)
  redis.call('HDEL', KEYS[1], item)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local purged = used
local dropped = {}
for i = 7, #ARGV do
  if not dropped[ARGV[i]] then
    used = used - tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or 0)
    dropped[ARGV[i]] = true
  end
end
local bytes = tonumber(ARGV[5])
if ARGV[4] ~= '' and ARGV[2] ~= '' and bytes > 0 then
  local quota = tonumber(ARGV[2])
  if ARGV[3] == '1' then bytes = math.min(bytes, quota - used) end
  if bytes <= 0 or used + bytes > quota then
    redis.call('HSET', KEYS[3], 'used', int(purged))
    return {0, 0, purged}
  end
end
for item in pairs(dropped) do
  redis.call('HDEL', KEYS[1], item)
  redis.call('ZREM', KEYS[2], item)
end
local added = 0
if ARGV[4] ~= '' then
  local held = tonumber(redis.call('HGET', KEYS[1], ARGV[4]) or 0)
  -- An item that falls to nothing, or whose end has passed, holds nothing: it goes.
  if held + bytes <= 0 or tonumber(ARGV[6]) <= now then
    redis.call('HDEL', KEYS[1], ARGV[4])
    redis.call('ZREM', KEYS[2], ARGV[4])
    added = -held
  else
    redis.call('HSET', KEYS[1], ARGV[4], int(held + bytes))
    redis.call('ZADD', KEYS[2], ARGV[6], ARGV[4])
    added = bytes
  end
end
used = used + added
redis.call('HSET', KEYS[3], 'used', int(used))
if ARGV[2] ~= '' then redis.call('HSET', KEYS[3], 'lastUsedAt', ARGV[1]) end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], last[2])
  redis.call('PEXPIREAT', KEYS[2], last[2])
end
return {1, added, used}`

// KEYS: items, ends, meta. ARGV: now. Returns {bytes, lastUsedAt}, ended items not counted.
const LEDGER_USAGE = LEDGER_USED + `
local v = redis.call('HMGET', KEYS[3], 'used', 'lastUsedAt')
local used = usedOf(v[1])
for _, item in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])) do
  used = used - tonumber(redis.call('HGET', KEYS[1], item) or 0)
end
return {used, tonumber(v[2] or 0)}`

/** name → [number of keys, script], registered like SCRIPTS (scripts.ts). */
export const KEY_SCRIPTS = {
  dcKeyCreate: [2, KEY_CREATE],
  dcKeyFind: [2, KEY_FIND],
  dcKeyRotate: [2, KEY_ROTATE],
  dcKeyRevoke: [2, KEY_REVOKE],
  dcLedgerAccount: [3, LEDGER_ACCOUNT],
  dcLedgerUsage: [3, LEDGER_USAGE]
} as const satisfies Record<string, readonly [number, string]>

declare module 'ioredis' {
  interface RedisCommander<Context> {
    dcKeyCreate (keys: string, hashes: string, name: string, record: string, ...hashList: string[]): Result<number, Context>
    dcKeyFind (keys: string, hashes: string, hash: string): Result<string | null, Context>
    dcKeyRotate (keys: string, hashes: string, name: string, read: string, next: string, hash: string, ...forgotten: string[]): Result<'ok' | 'gone' | 'retry' | 'taken', Context>
    dcKeyRevoke (keys: string, hashes: string, name: string): Result<number, Context>
    dcLedgerAccount (items: string, ends: string, meta: string, now: number, quota: Arg, upTo: Arg, item: string, bytes: number, until: number, ...dropped: string[]): Result<[number, number, number], Context>
    dcLedgerUsage (items: string, ends: string, meta: string, now: number): Result<[number, number], Context>
  }
}
