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
import type { Redis } from 'ioredis'
import { DropcodeError } from '../errors.js'
import { defineScripts } from './redis-scripts.js'
import type { Claim, FileRecord, Lookup, StateStore, Unavailable, UploadSession } from './state-store.js'

const FIELDS = ['code', 'blobKey', 'filename', 'contentType', 'size', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt'] as const
const NUMERIC = new Set(['size', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt'])

const SESSION_FIELDS = ['id', 'blobKey', 'handle', 'filename', 'totalChunks', 'maxDownloads', 'expiryHours', 'createdAt'] as const
const SESSION_NUMERIC = new Set(['totalChunks', 'maxDownloads', 'expiryHours', 'createdAt'])
/** Bookkeeping fields of a session hash that are not part of UploadSession. */
const SESSION_INTERNAL = new Set(['state', 'leaseUntil', 'bytes'])

/** An HGETALL reply (flat field/value list) as an object, numbers parsed. */
function fromFlat<T> (flat: string[], numeric: Set<string>, skip: Set<string> = new Set()): T {
  const out: Record<string, string | number> = {}
  for (let i = 0; i < flat.length; i += 2) {
    const k = flat[i]!
    if (skip.has(k)) continue
    out[k] = numeric.has(k) ? Number(flat[i + 1]) : flat[i + 1]!
  }
  return out as T
}
const toRecord = (flat: string[]) => fromFlat<FileRecord>(flat, NUMERIC)
const toSession = (flat: string[]) => fromFlat<UploadSession>(flat, SESSION_NUMERIC, SESSION_INTERNAL)

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
  defineScripts(client)

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
