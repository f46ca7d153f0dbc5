/**
 * SessionStore on LMDB: a session record, its chunk records under [id, index] and its chunk
 * locks under [id, index]; see env.ts for the layout. Locks live in the database (not in
 * memory) so that several processes sharing a DATA_DIR respect each other's, and a crashed
 * holder's lock simply runs out. A session's place under its key ([key id, id] in `places`)
 * moves with the session's idle expiry in the same transaction, and goes with the session.
 */
import { DropcodeError } from '../../core/errors.js'
import { ownedBy, type ChunkRecord } from '../../core/model.js'
import type { ChunkCommit, CompletedFile, CompletionStart, SessionStore } from '../types.js'
import type { LmdbEnv, StoredDone, StoredSession } from './env.js'

const MAX_INDEX = 1e9

const resultOf = (d: StoredDone): CompletedFile => ({ code: d.code, size: d.size, sha256: d.sha256 })

export interface LmdbSessionOptions {
  /** Most file records and session places held at once (DROPCODE_STATE_FULL beyond). */
  maxRecords: number
  /** Removes up to `limit` expired entries (inside a write), to make room. */
  purgeRoom: (now: number, limit: number) => void
}

export function createLmdbSessions (env: LmdbEnv, opts: LmdbSessionOptions): SessionStore & { removeNow (id: string): void } {
  const { sessions, chunks, locks, done, places } = env
  const live = (id: string, now: number) => {
    const s = sessions.get(id)
    return s !== undefined && now < s.until ? s : undefined
  }
  const range = (id: string) => ({ start: [id, 0] as [string, number], end: [id, MAX_INDEX] as [string, number] })
  const keyOf = (s: StoredSession) => s.session.keyId ?? ''
  const save = (next: StoredSession, previous: StoredSession | undefined) => {
    sessions.put(next.session.id, next)
    env.reindex('s', next.session.id, previous?.until, next.until)
    if (keyOf(next) !== '' && previous?.until !== next.until) places.put([keyOf(next), next.session.id], next.until)
  }
  /** Removes a session with its chunks, locks and place (inside a write). */
  const remove = (id: string) => {
    const s = sessions.get(id)
    if (s !== undefined) {
      env.expiry.remove([s.until, 's', id])
      if (keyOf(s) !== '') places.remove([keyOf(s), id])
    }
    sessions.remove(id)
    for (const key of chunks.getKeys(range(id))) chunks.remove(key)
    for (const key of locks.getKeys(range(id))) locks.remove(key)
  }

  return {
    removeNow: remove,

    async reserve (keyId, id, until, now, max) {
      const result = await env.write(() => {
        let taken = 0
        for (const { key, value } of places.getRange({ start: [keyId, ''], end: [keyId, '\uffff'] })) {
          if (value > now) taken++
          else places.remove(key) // its session expired, or never came
        }
        if (taken >= max) return false
        if (env.recordCount() >= opts.maxRecords) {
          opts.purgeRoom(now, 100)
          if (env.recordCount() >= opts.maxRecords) return 'full'
        }
        places.put([keyId, id], until)
        return true
      })
      if (result === 'full') throw new DropcodeError('DROPCODE_STATE_FULL')
      return result
    },

    async release (keyId, id) {
      await env.write(() => places.remove([keyId, id]))
    },

    async create (session, now, ttlMs) {
      await env.write(() => save({ session, until: now + ttlMs, state: 'open', leaseUntil: 0, bytes: 0, received: 0 }, sessions.get(session.id)))
    },

    async get (id, now) {
      const s = live(id, now)
      if (s === undefined) return null
      const received = new Map<number, ChunkRecord>()
      for (const { key, value } of chunks.getRange(range(id))) received.set(key[1], value)
      return { session: s.session, chunks: received }
    },

    async beginChunk (id, index, token, lockUntil, now, ttlMs, keyId) {
      return await env.write(() => {
        const s = live(id, now)
        if (s === undefined || !ownedBy(s.session, keyId)) return { ok: false, reason: 'unknown' } as const
        if (s.state === 'completing' && s.leaseUntil > now) return { ok: false, reason: 'busy', until: s.leaseUntil } as const
        const lock = locks.get([id, index])
        if (lock !== undefined && lock.until > now) return { ok: false, reason: 'locked', until: lock.until } as const
        locks.put([id, index], { token, until: lockUntil })
        save({ ...s, until: now + ttlMs }, s)
        return { ok: true, session: s.session } as const
      })
    },

    async extendChunk (id, index, token, lockUntil, now) {
      return await env.write(() => {
        const lock = locks.get([id, index])
        if (lock === undefined || lock.token !== token || lock.until <= now) return false
        locks.put([id, index], { token, until: lockUntil })
        return true
      })
    },

    async abortChunk (id, index, token) {
      return await env.write(() => {
        const lock = locks.get([id, index])
        if (lock === undefined || lock.token !== token) return null
        const previous = chunks.get([id, index]) ?? null
        locks.remove([id, index])
        const s = sessions.get(id)
        if (previous !== null) {
          chunks.remove([id, index])
          if (s !== undefined) sessions.put(id, { ...s, bytes: s.bytes - previous.size, received: s.received - 1 })
        }
        return previous
      })
    },

    async commitChunk (id, index, token, chunk, now, ttlMs) {
      return await env.write((): ChunkCommit => {
        const s = live(id, now)
        if (s === undefined) return { ok: false, reason: 'gone' }
        const lock = locks.get([id, index])
        if (lock === undefined || lock.token !== token || lock.until <= now) return { ok: false, reason: 'lost' }
        const previous = chunks.get([id, index]) ?? null
        const bytes = s.bytes + chunk.size - (previous?.size ?? 0)
        const received = s.received + (previous === null ? 1 : 0)
        chunks.put([id, index], chunk)
        locks.remove([id, index])
        save({ ...s, bytes, received, until: now + ttlMs }, s)
        return { ok: true, received, previous, bytes }
      })
    },

    async settleLayout (id, wanted, now) {
      if (wanted === undefined) return live(id, now)?.session.layout
      return await env.write(() => {
        const s = live(id, now)
        if (s === undefined) return undefined
        if (s.session.layout === undefined) save({ ...s, session: { ...s.session, layout: wanted } }, s)
        return s.session.layout ?? wanted
      })
    },

    async beginCompletion (id, now, leaseUntil, keyId, token, ttlMs) {
      return await env.write((): CompletionStart => {
        const s = live(id, now)
        if (s === undefined) {
          const d = done.get(id)
          if (d === undefined || now >= d.until || !ownedBy(d, keyId)) return { status: 'unknown' }
          return { status: 'done', result: resultOf(d) }
        }
        if (!ownedBy(s.session, keyId)) return { status: 'unknown' }
        if (s.state === 'completing' && s.leaseUntil > now) return { status: 'busy', until: s.leaseUntil }
        // Every live chunk lock must go first: busy until the last of them runs out.
        let locked = 0
        for (const { value: lock } of locks.getRange(range(id))) if (lock.until > now) locked = Math.max(locked, lock.until)
        if (locked > 0) return { status: 'busy', until: locked }
        const received = new Map<number, ChunkRecord>()
        for (const { key, value } of chunks.getRange(range(id))) received.set(key[1], value)
        save({ ...s, state: 'completing', leaseUntil, completer: token, until: Math.max(s.until, leaseUntil + ttlMs) }, s)
        return { status: 'open', session: s.session, chunks: received }
      })
    },

    async extendCompletion (id, token, leaseUntil, now, ttlMs) {
      return await env.write(() => {
        const s = live(id, now)
        if (s === undefined || s.state !== 'completing' || s.completer !== token || s.leaseUntil <= now) return false
        save({ ...s, leaseUntil, until: Math.max(s.until, leaseUntil + ttlMs) }, s)
        return true
      })
    },

    async releaseCompletion (id, _now, token) {
      await env.write(() => {
        const s = sessions.get(id)
        if (s !== undefined && s.state === 'completing' && s.completer === token) {
          const { completer: _completer, ...rest } = s
          save({ ...rest, state: 'open', leaseUntil: 0 }, s)
        }
      })
    },

    async remove (id) {
      await env.write(() => remove(id))
    },

    async finish (id, result, now, doneTtlMs) {
      await env.write(() => {
        const previous = done.get(id)
        const s = sessions.get(id)?.session
        // The session is gone at a repeated finish: the first one's description and key stay.
        const described: Omit<StoredDone, keyof CompletedFile | 'until'> = s === undefined
          ? { ...(previous?.keyId !== undefined ? { keyId: previous.keyId } : {}), ...(previous?.session !== undefined ? { session: previous.session, chunks: previous.chunks ?? [] } : {}) }
          : {
              ...(s.keyId !== undefined ? { keyId: s.keyId } : {}),
              session: { filename: s.filename, totalChunks: s.totalChunks, maxDownloads: s.maxDownloads, expiryHours: s.expiryHours },
              chunks: [...chunks.getRange(range(id))].map(({ key, value }) => [key[1], value.size, value.sha256])
            }
        remove(id)
        done.put(id, { ...result, until: now + doneTtlMs, ...described })
        env.reindex('d', id, previous?.until, now + doneTtlMs)
      })
    },

    async completed (id, now) {
      const d = done.get(id)
      if (d === undefined || now >= d.until || d.session === undefined) return null
      return {
        session: { id, ...d.session, ...(d.keyId !== undefined ? { keyId: d.keyId } : {}) },
        chunks: new Map((d.chunks ?? []).map(([index, size, sha256]) => [index, { size, sha256 }])),
        result: resultOf(d)
      }
    },

    async objectNeededUntil (id, now) {
      return live(id, now)?.until ?? null
    }
  }
}
