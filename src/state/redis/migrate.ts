/**
 * Moves keys written by dropcode 0.1 to the current layout (index.ts), once, at start-up, so an
 * upgraded deployment keeps every outstanding code and session:
 *   file:CODE                    → file:{CODE} (+ sha256 '' unknown, retainUntil = expiry + grace)
 *   blobs (one sorted set)       → cleanup:{cH} buckets (no owners: the old deadlines are final)
 *   session:ID (+ :chunks/:locks) → session:{ID} … (chunk receipts wrapped; locks dropped)
 *   done:ID                      → done:{ID}
 * Rate-limit counters are left to expire. Each key moves in one script (old and new key
 * together), so instances starting at the same time cannot move one twice; `{p}layout` = 2
 * marks a database as done. Only a single Redis can hold the old layout (0.1 did not run on
 * Redis Cluster), so this never runs against a cluster.
 */
import type { Redis } from 'ioredis'

const MOVE_FILE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  local flat = redis.call('HGETALL', KEYS[1])
  local exp = tonumber(redis.call('HGET', KEYS[1], 'expiresAt'))
  local ru = tostring(exp + tonumber(ARGV[1]))
  redis.call('HSET', KEYS[2], unpack(flat))
  redis.call('HSET', KEYS[2], 'sha256', '', 'retainUntil', ru)
  redis.call('PEXPIREAT', KEYS[2], ru)
end
redis.call('DEL', KEYS[1])
return 1`

// KEYS: old meta, old chunks, old locks, new meta, new chunks. ARGV: now
const MOVE_SESSION = `
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) return 0 end
if redis.call('EXISTS', KEYS[4]) == 0 then
  local u = tostring(tonumber(ARGV[1]) + ttl)
  redis.call('HSET', KEYS[4], unpack(redis.call('HGETALL', KEYS[1])))
  redis.call('HSET', KEYS[4], 'sha256', '', 'until', u, 'state', 'open')
  redis.call('PEXPIREAT', KEYS[4], u)
  local chunks = redis.call('HGETALL', KEYS[2])
  for i = 1, #chunks, 2 do
    local size = cjson.decode(chunks[i + 1]).size
    redis.call('HSET', KEYS[5], chunks[i], cjson.encode({ size = size, sha256 = '', receipt = chunks[i + 1] }))
  end
  if #chunks > 0 then redis.call('PEXPIREAT', KEYS[5], u) end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1`

// KEYS: old done, new done. ARGV: now
const MOVE_DONE = `
local code = redis.call('GET', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if code and ttl > 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  local u = tostring(tonumber(ARGV[1]) + ttl)
  redis.call('HSET', KEYS[2], 'code', code, 'until', u)
  redis.call('PEXPIREAT', KEYS[2], u)
end
redis.call('DEL', KEYS[1])
return 1`

async function * scan (client: Redis, match: string) {
  for await (const keys of client.scanStream({ match, count: 1000 })) yield * (keys as string[])
}

/** @returns how many keys were moved (0 when the database is already on the current layout) */
export async function migrateV1 (client: Redis, p: string, graceMs: number, now: number): Promise<number> {
  if (await client.get(`${p}layout`) === '2') return 0
  let moved = 0
  const esc = (s: string) => s.replace(/[*?[\]\\]/g, c => `\\${c}`)
  for await (const key of scan(client, `${esc(p)}file:*`)) {
    const code = key.slice(`${p}file:`.length)
    if (!/^[A-Za-z0-9]{6}$/.test(code)) continue // the new layout's keys have braces
    moved += Number(await client.eval(MOVE_FILE, 2, key, `${p}file:{${code}}`, graceMs))
  }
  const blobs = `${p}blobs`
  for await (const page of client.zscanStream(blobs, { count: 1000 })) {
    const flat = page as string[]
    for (let i = 0; i < flat.length; i += 2) {
      const blobKey = flat[i]!
      await client.zadd(`${p}cleanup:{c${blobKey[0]}}`, flat[i + 1]!, blobKey)
      moved++
    }
  }
  await client.del(blobs)
  for await (const key of scan(client, `${esc(p)}session:*`)) {
    const id = key.slice(`${p}session:`.length)
    if (!/^[A-Za-z0-9_-]{22}$/.test(id)) continue // :chunks, :locks, or the new layout
    moved += Number(await client.eval(MOVE_SESSION, 5, key, `${key}:chunks`, `${key}:locks`, `${p}session:{${id}}`, `${p}session:{${id}}:chunks`, now))
  }
  for await (const key of scan(client, `${esc(p)}done:*`)) {
    const id = key.slice(`${p}done:`.length)
    if (!/^[A-Za-z0-9_-]{22}$/.test(id)) continue
    moved += Number(await client.eval(MOVE_DONE, 2, key, `${p}done:{${id}}`, now))
  }
  await client.set(`${p}layout`, '2')
  return moved
}
