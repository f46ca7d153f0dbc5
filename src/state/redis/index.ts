/**
 * Redis state driver: one Redis (with replicas or Sentinel) or a Redis Cluster.
 *
 * Key layout (prefix from REDIS_PREFIX, default `dropcode:`); the part in braces is the Redis
 * Cluster hash tag, so the keys of one code, one session, one cleanup bucket, the API keys, or
 * one key's ledger share a slot:
 *   {p}file:{CODE}            hash  FileRecord fields; PEXPIREAT retainUntil. A retracted publish's
 *                                   tombstone holds only blobKey, retainUntil, retracted (below)
 *   {p}file:{CODE}:claims     hash  claim id → resumable-until (epoch ms), or 'r' (refunded)
 *   {p}file:{CODE}:served     hash  claim id → bytes charged to the claim (its file's size when taken)
 *   {p}cleanup:{cH}           zset  object key → cleanup deadline; H = the key's first hex digit
 *   {p}cleanup:{cH}:owners    hash  object key → owners ("f:CODE s:ID"; p:CODE pending publish,
 *                                   x:CODE given-up publish: see core/model.ts Owner)
 *   {p}session:{ID}           hash  UploadSession fields (incl. keyId) + until (idle expiry),
 *                                   state (open|completing), leaseUntil, bytes
 *   {p}session:{ID}:chunks    hash  chunk index → ChunkRecord JSON
 *   {p}session:{ID}:locks     hash  chunk index → "token lockUntil" while a request streams it
 *   {p}done:{ID}              hash  code, size, sha256, until, keyId of a completed session (repeated
 *                                   completes), and for verify its filename, totalChunks, maxDownloads,
 *                                   expiryHours and chunks ("INDEX:SIZE:SHA256 …")
 *   {p}places:{NAME}          zset  session id → until: the open sessions of one API key, by name (a place
 *                                   whose until has passed is free; the zset expires with its last)
 *   {p}rl:{NAME}              hash  count, until (a rate-limit window)
 *   {p}keys:{keys}            hash  key name → ApiKeyRecord JSON (API keys as data: few, rarely
 *                                   written, so all under one tag; each write is one script)
 *   {p}keys:{keys}:hashes     hash  hex SHA-256 of a secret → key name
 *   {p}usage:{u:NAME}         hash  item → bytes: the ledger of key NAME (KeyStore.account)
 *   {p}usage:{u:NAME}:until   zset  item → until (an item whose until has passed holds nothing);
 *                                   it and the items hash expire at the latest until
 *   {p}usage:{u:NAME}:meta    hash  used (bytes of the items, ended ones until the next account
 *                                   drops them; 0 once the zset is gone), lastUsedAt. No TTL
 *
 * Atomicity: every read-check-modify is one Lua script (scripts.ts, key-scripts.ts) over one
 * hash tag (a key rotation is computed in JavaScript and written by a script only if the record
 * is still the one it read). Nothing crosses tags: the cleanup index is never written in the
 * same step as a record; instead the sweeper asks an object's owners whether they still need it
 * before deleting it (see services/sweeper.ts), so a crash between two steps leaves at worst an
 * object swept later. The same goes for a key's places: reserving one is atomic (so concurrent
 * starts never exceed MAX_OPEN_SESSIONS_PER_KEY), but moving or freeing it is a second step
 * after the session's own: a lost move frees the place early (at the expiry it had before), a
 * lost free keeps it until the session's last idle expiry.
 *
 * Redis Cluster (REDIS_CLUSTER_NODES; the client is built in connect.ts): nothing here crosses a
 * slot. The only enumeration is the 16 cleanup buckets, addressed by name (their tags c0…cf hash
 * to slots spread over the masters); nothing SCANs.
 * `sessions.get` is a MULTI over two keys of one tag. The prefix stays outside the braces, so it
 * never moves a key to another slot; the ioredis `keyPrefix` option is not used.
 *
 * Late commands: a command that timed out on the client (5 s) can still run when a paused Redis
 * wakes up, after its request was answered 503 and the instance acted on the failure. Claims are
 * refunded by id for that reason (services/refunds.ts). A publish registers its code as pending
 * on the object's cleanup entry before creating the record and is answered only after
 * `confirm` turns it into the owner; a publish that fails is `abandon`ed, and the next sweep
 * `retract`s its record (a tombstone stops a create that runs even later) before deleting the
 * object. So a record whose create ran late never points at a deleted object (docs/crashes.md).
 *
 * Replication is asynchronous: a failover can lose the writes the old primary acknowledged
 * last (a lost claim can be served again; README, "Scaling").
 *
 * Time: every method takes `now` from the caller; liveness compares it with stored times, and
 * TTLs (PEXPIREAT on the same times) only reclaim memory. Keep instance clocks in sync (NTP).
 * The client does not queue commands while disconnected, so requests fail fast (503).
 */
import type { Cluster, Redis } from 'ioredis'
import { DropcodeError } from '../../core/errors.js'
import type { ChunkRecord, FileRecord, Lookup, Owner, Unavailable, UploadSession } from '../../core/model.js'
import type { CleanupIndex, CounterStore, FileStore, SessionStore, StateBackend } from '../types.js'
import { KEY_SCRIPTS } from './key-scripts.js'
import { createRedisKeys } from './keys.js'
import { SCRIPTS } from './scripts.js'

/** keyName is optional: written only when set. */
const FILE_FIELDS = ['code', 'blobKey', 'filename', 'contentType', 'size', 'sha256', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt', 'retainUntil', 'keyName'] as const
const FILE_NUMERIC = new Set(['size', 'maxDownloads', 'downloads', 'createdAt', 'expiresAt', 'retainUntil'])
const SESSION_FIELDS = ['id', 'blobKey', 'handle', 'filename', 'totalChunks', 'maxDownloads', 'expiryHours', 'createdAt', 'sha256'] as const
const SESSION_NUMERIC = new Set(['totalChunks', 'maxDownloads', 'expiryHours', 'createdAt', 'chunkSize'])
/** The session hash's own bookkeeping, not part of UploadSession. */
const SESSION_INTERNAL = new Set(['state', 'leaseUntil', 'completer', 'bytes', 'until'])
const CLEANUP_BUCKETS = '0123456789abcdef'

/** An HGETALL reply (flat field/value list) as an object; numbers parsed, internals skipped. */
function fromFlat<T> (flat: string[], numeric: Set<string>, skip?: Set<string>): T {
  const out: Record<string, string | number> = {}
  for (let i = 0; i < flat.length; i += 2) {
    const k = flat[i]!
    if (skip?.has(k) === true) continue
    out[k] = numeric.has(k) ? Number(flat[i + 1]) : flat[i + 1]!
  }
  return out as T
}
const toFile = (flat: string[]) => fromFlat<FileRecord>(flat, FILE_NUMERIC)
const toSession = (flat: string[]) => fromFlat<UploadSession>(flat, SESSION_NUMERIC, SESSION_INTERNAL)
const toLookup = (reply: string | string[]): Lookup =>
  typeof reply === 'string' ? { ok: false, reason: reply as Unavailable } : { ok: true, file: toFile(reply) }
function toChunks (flat: string[]): Map<number, ChunkRecord> {
  const chunks = new Map<number, ChunkRecord>()
  for (let i = 0; i < flat.length; i += 2) chunks.set(Number(flat[i]), JSON.parse(flat[i + 1]!) as ChunkRecord)
  return chunks
}

/** Runs a command; connection trouble becomes a 503 with the cause kept for the log. */
async function guard<T> (op: () => Promise<T>): Promise<T> {
  try {
    return await op()
  } catch (err) {
    throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: err })
  }
}

export interface RedisBackendOptions {
  /** A connected (or connecting) client; the driver does not close it. */
  client: Redis | Cluster
  /** Prepended to every key, e.g. `dropcode:`. */
  prefix: string
}

export function createRedisBackend ({ client, prefix: p }: RedisBackendOptions): StateBackend {
  for (const [name, [numberOfKeys, lua]] of Object.entries({ ...SCRIPTS, ...KEY_SCRIPTS })) client.defineCommand(name, { numberOfKeys, lua })
  const r = client as Redis // the script commands are declared on Redis; Cluster routes them by their first key
  const fileKeys = (code: string) => [`${p}file:{${code}}`, `${p}file:{${code}}:claims`] as const
  /** With the charges of its claims (only the scripts that need them get this key). */
  const fileKeys3 = (code: string) => [...fileKeys(code), `${p}file:{${code}}:served`] as const
  const placesKey = (keyId: string) => `${p}places:{${keyId}}`
  const bucketKeys = (blobKey: string) => bucketOf(blobKey[0] ?? '0')
  const bucketOf = (h: string) => [`${p}cleanup:{c${h}}`, `${p}cleanup:{c${h}}:owners`] as const
  const sessionKeys = (id: string) => [`${p}session:{${id}}`, `${p}session:{${id}}:chunks`, `${p}session:{${id}}:locks`] as const
  const doneKey = (id: string) => `${p}done:{${id}}`

  const files: FileStore = {
    async create (file, now) {
      const flat = FILE_FIELDS.flatMap(f => file[f] === undefined ? [] : [f, String(file[f])])
      return await guard(async () => (await r.dcFileCreate(...fileKeys3(file.code), now, file.retainUntil, ...flat)) === 1)
    },
    async lookup (code, now) {
      return toLookup(await guard(() => r.dcFileLookup(...fileKeys(code), now)))
    },
    async claim (code, claimId, now, until) {
      const found = toLookup(await guard(() => r.dcFileClaim(...fileKeys3(code), now, claimId, until)))
      return found.ok ? { ok: true, file: found.file, last: found.file.downloads >= found.file.maxDownloads } : found
    },
    async resume (code, claimId, now) {
      const flat = await guard(() => r.dcFileResume(...fileKeys(code), now, claimId))
      return flat === null ? null : toFile(flat)
    },
    async charge (code, claimId, bytes, limit, now) {
      return (await guard(() => r.dcFileCharge(...fileKeys3(code), now, claimId, bytes, limit))) === 1
    },
    async endClaim (code, claimId, now, keepUntil, unsent = 0) {
      return await guard(() => r.dcFileEndClaim(...fileKeys3(code), now, claimId, keepUntil ?? '', unsent))
    },
    async refund (code, claimId, now) {
      await guard(() => r.dcFileRefund(...fileKeys(code), now, claimId))
    },
    async delete (code, now) {
      return toLookup(await guard(() => r.dcFileDelete(...fileKeys3(code), now)))
    },
    async objectNeededUntil (code, blobKey, now) {
      return await guard(() => r.dcFileNeeded(...fileKeys(code), now, blobKey))
    },
    async retract (code, blobKey, until, now) {
      await guard(() => r.dcFileRetract(...fileKeys3(code), now, blobKey, until))
    }
  }

  const cleanup: CleanupIndex = {
    async schedule (blobKey, deadline, owner) {
      await guard(() => r.dcCleanupSchedule(...bucketKeys(blobKey), blobKey, deadline, owner ?? ''))
    },
    async lease (now, limit, leaseUntil) {
      const out: Array<{ blobKey: string, owners: Owner[] }> = []
      // Start at a random bucket so concurrent sweepers spread over the buckets.
      const first = Math.floor(Math.random() * CLEANUP_BUCKETS.length)
      for (let i = 0; i < CLEANUP_BUCKETS.length && out.length < limit; i++) {
        const h = CLEANUP_BUCKETS[(first + i) % CLEANUP_BUCKETS.length]!
        const flat = await guard(() => r.dcCleanupLease(...bucketOf(h), now, limit - out.length, leaseUntil))
        for (let j = 0; j < flat.length; j += 2) {
          out.push({ blobKey: flat[j]!, owners: flat[j + 1] === '' ? [] : flat[j + 1]!.split(' ') as Owner[] })
        }
      }
      return out
    },
    async forget (blobKey) {
      await guard(() => r.dcCleanupForget(...bucketKeys(blobKey), blobKey))
    },
    async release (leaseUntil, now) {
      await guard(() => Promise.all([...CLEANUP_BUCKETS].map(h => r.dcCleanupRelease(bucketOf(h)[0], leaseUntil, now))))
    },
    async confirm (blobKey, deadline, code) {
      return (await guard(() => r.dcCleanupConfirm(...bucketKeys(blobKey), blobKey, deadline, code))) === 1
    },
    async abandon (blobKey, code, now) {
      await guard(() => r.dcCleanupAbandon(...bucketKeys(blobKey), blobKey, now, code))
    },
    async countDue (now) {
      const counts = await guard(() => Promise.all([...CLEANUP_BUCKETS].map(h => client.zcount(bucketOf(h)[0], '-inf', now))))
      return counts.reduce((a, b) => a + b, 0)
    }
  }

  // Moving and freeing a place are second steps (see the top comment): their failure must not
  // fail a request whose own step succeeded.
  const touch = async (keyId: string | undefined, id: string, until: number) => {
    if (keyId !== undefined && keyId !== '') await r.dcPlaceTouch(placesKey(keyId), id, until).catch(() => {})
  }
  const free = async (keyId: string, id: string) => {
    if (keyId !== '') await client.zrem(placesKey(keyId), id).catch(() => {})
  }

  const sessions: SessionStore = {
    async reserve (keyId, id, until, now, max) {
      return (await guard(() => r.dcPlaceReserve(placesKey(keyId), now, id, until, max))) === 1
    },
    async release (keyId, id) {
      await free(keyId, id)
    },
    async create (session, now, ttlMs) {
      const flat: string[] = SESSION_FIELDS.flatMap(f => [f, String(session[f])])
      if (session.layout !== undefined) flat.push('layout', session.layout)
      if (session.chunkSize !== undefined) flat.push('chunkSize', String(session.chunkSize))
      if (session.keyId !== undefined) flat.push('keyId', session.keyId)
      if (session.resumable !== undefined) flat.push('resumable', session.resumable)
      flat.push('state', 'open', 'bytes', '0', 'until', String(now + ttlMs))
      await guard(() => r.dcSessionCreate(sessionKeys(session.id)[0], now + ttlMs, ...flat))
    },
    async get (id, now) {
      const [meta, chunks] = sessionKeys(id)
      const replies = await guard(async () => (await client.multi().hgetall(meta).hgetall(chunks).exec())!)
      const [[, fields], [, chunkFields]] = replies as [[unknown, Record<string, string>], [unknown, Record<string, string>]]
      if (fields.until === undefined || now >= Number(fields.until)) return null
      return { session: toSession(Object.entries(fields).flat()), chunks: toChunks(Object.entries(chunkFields).flat()) }
    },
    async beginChunk (id, index, token, lockUntil, now, ttlMs, keyId) {
      const reply = await guard(() => r.dcChunkBegin(...sessionKeys(id), now, index, token, lockUntil, now + ttlMs, keyId))
      if (typeof reply === 'string') {
        const [reason, until] = reply.split(' ') as ['unknown' | 'busy' | 'locked', string | undefined]
        return reason === 'unknown' ? { ok: false, reason } : { ok: false, reason, until: Number(until) }
      }
      const session = toSession(reply)
      await touch(session.keyId, id, now + ttlMs)
      return { ok: true, session }
    },
    async extendChunk (id, index, token, lockUntil, now) {
      return (await guard(() => r.dcChunkExtend(sessionKeys(id)[2], now, index, token, lockUntil))) === 1
    },
    async abortChunk (id, index, token, now) {
      const prev = await guard(() => r.dcChunkAbort(...sessionKeys(id), now, index, token))
      return prev === null ? null : JSON.parse(prev) as ChunkRecord
    },
    async commitChunk (id, index, token, chunk, now, ttlMs) {
      const [status, received, bytes, prev, keyId] = await guard(() => r.dcChunkCommit(...sessionKeys(id), now, index, token, JSON.stringify(chunk), now + ttlMs))
      if (status !== 'ok') return { ok: false, reason: status as 'gone' | 'lost' }
      await touch(keyId, id, now + ttlMs)
      return { ok: true, received: received!, bytes: bytes!, previous: prev != null ? JSON.parse(prev) as ChunkRecord : null }
    },
    async settleLayout (id, wanted, now) {
      return (await guard(() => r.dcSessionLayout(sessionKeys(id)[0], now, wanted ?? ''))) ?? undefined
    },
    async beginCompletion (id, now, leaseUntil, keyId, token, ttlMs) {
      const [status, a, b, c] = await guard(() => r.dcCompleteBegin(...sessionKeys(id), doneKey(id), now, leaseUntil, keyId, token, leaseUntil + ttlMs))
      if (status === 'done') return { status, result: { code: a as string, size: Number(b), sha256: c! } }
      if (status === 'busy') return { status, until: Number(a) }
      if (status !== 'open') return { status: 'unknown' }
      const session = toSession(a as string[])
      await touch(c, id, leaseUntil + ttlMs)
      return { status, session, chunks: toChunks(b as string[]) }
    },
    async extendCompletion (id, token, leaseUntil, now, ttlMs) {
      const keyId = await guard(() => r.dcCompleteExtend(...sessionKeys(id), now, leaseUntil, token, '', leaseUntil + ttlMs))
      if (keyId === null) return false
      await touch(keyId, id, leaseUntil + ttlMs)
      return true
    },
    async releaseCompletion (id, _now, token) {
      await guard(() => r.dcCompleteRelease(sessionKeys(id)[0], token))
    },
    async finish (id, result, now, doneTtlMs) {
      await free(await guard(() => r.dcSessionFinish(...sessionKeys(id), doneKey(id), now + doneTtlMs, result.code, result.size, result.sha256)), id)
    },
    async completed (id, now) {
      const d = await guard(() => client.hgetall(doneKey(id)))
      if (d.until === undefined || now >= Number(d.until) || d.filename === undefined) return null
      const chunks = new Map<number, { size: number, sha256: string }>()
      for (const c of (d.chunks ?? '').split(' ')) {
        const [index, size, sha256] = c.split(':')
        if (index !== undefined && index !== '') chunks.set(Number(index), { size: Number(size), sha256: sha256 ?? '' })
      }
      return {
        session: {
          id,
          filename: d.filename,
          totalChunks: Number(d.totalChunks),
          maxDownloads: Number(d.maxDownloads),
          expiryHours: Number(d.expiryHours),
          ...(d.keyId !== undefined && d.keyId !== '' ? { keyId: d.keyId } : {})
        },
        chunks,
        result: { code: d.code!, size: Number(d.size), sha256: d.sha256! }
      }
    },
    async remove (id) {
      await free(await guard(() => r.dcSessionRemove(...sessionKeys(id))), id)
    },
    async objectNeededUntil (id, now) {
      return await guard(() => r.dcSessionNeeded(sessionKeys(id)[0], now))
    }
  }

  const counters: CounterStore = {
    async incr (key, windowMs, now) {
      const [count, until] = await guard(() => r.dcCounterIncr(`${p}rl:{${key}}`, now, now + windowMs))
      return { count, resetMs: Math.max(until - now, 0) }
    },
    async read (key, now) {
      const [count, until] = await guard(() => client.hmget(`${p}rl:{${key}}`, 'count', 'until'))
      return until === null || Number(until) <= now ? { count: 0, resetMs: 0 } : { count: Number(count), resetMs: Number(until) - now }
    }
  }

  return {
    files,
    cleanup,
    sessions,
    counters,
    keys: createRedisKeys({ r, p, guard }),
    async ping () { await guard(() => client.ping()) },
    async close () {}
  }
}
