/** FileStore on LMDB: one record per code with its claims inside; see env.ts for the layout. */
import { DropcodeError } from '../../core/errors.js'
import type { Lookup } from '../../core/model.js'
import type { FileStore } from '../types.js'
import type { LmdbEnv, StoredFile } from './env.js'

type CreateResult = boolean | 'full'

function status (stored: StoredFile | undefined, now: number): Lookup {
  if (stored === undefined || now >= stored.retainUntil) return { ok: false, reason: 'unknown' }
  const { claims: _claims, served: _served, ...file } = stored
  if (now >= file.expiresAt) return { ok: false, reason: 'expired' }
  if (file.downloads >= file.maxDownloads) return { ok: false, reason: 'exhausted' }
  return { ok: true, file }
}

/** Until when the object is needed by this record, or null. */
function needed (stored: StoredFile | undefined, now: number): number | null {
  if (stored === undefined || now >= stored.retainUntil) return null
  if (now < stored.expiresAt && stored.downloads < stored.maxDownloads) return stored.retainUntil
  let best = 0
  for (const until of Object.values(stored.claims)) if (until !== 'r' && until > now && until > best) best = until
  return best === 0 ? null : best
}

/**
 * Claims whose window has passed are dropped on every write (refund tombstones stay), with what
 * they were charged.
 */
function liveClaims (stored: StoredFile, now: number): { claims: StoredFile['claims'], served: Record<string, number> } {
  const claims: StoredFile['claims'] = {}
  const served: Record<string, number> = {}
  for (const [id, until] of Object.entries(stored.claims)) {
    if (until !== 'r' && until <= now) continue
    claims[id] = until
    const charged = stored.served?.[id]
    if (charged !== undefined) served[id] = charged
  }
  return { claims, served }
}

export function createLmdbFiles (env: LmdbEnv, opts: { maxRecords: number, purgeRoom: (now: number, limit: number) => void }): FileStore {
  const { files } = env
  const put = (stored: StoredFile, previous: StoredFile | undefined) => {
    files.put(stored.code, stored)
    env.reindex('f', stored.code, previous?.retainUntil, stored.retainUntil)
  }

  return {
    async create (file, now) {
      const result = await env.write((): CreateResult => {
        const existing = files.get(file.code)
        if (existing !== undefined && now < existing.retainUntil) return false
        if (env.recordCount() >= opts.maxRecords) {
          opts.purgeRoom(now, 100)
          if (env.recordCount() >= opts.maxRecords) return 'full'
        }
        put({ ...file, claims: {} }, files.get(file.code))
        return true
      })
      if (result === 'full') throw new DropcodeError('DROPCODE_STATE_FULL')
      return result
    },

    async lookup (code, now) {
      return status(files.get(code), now)
    },

    async claim (code, claimId, now, until) {
      // A code that cannot be claimed is answered from a read, without a write transaction: most
      // such requests are 404s for codes that never existed (guessers, stale links), and a write
      // each made 404s cost as much as downloads. Safe: a record that is missing, expired or
      // exhausted at this read may be answered as it was then (a claim racing a creation or a
      // refund may be ordered before it); a claimable one is checked again inside the write.
      const seen = status(files.get(code), now)
      if (!seen.ok) return seen
      return await env.write(() => {
        const stored = files.get(code)
        const s = status(stored, now)
        if (!s.ok) return s
        if (stored!.claims[claimId] !== undefined) return { ok: false, reason: 'unknown' }
        const file = { ...s.file, downloads: s.file.downloads + 1 }
        const live = liveClaims(stored!, now)
        put({ ...file, claims: { ...live.claims, [claimId]: Math.min(until, stored!.retainUntil) }, served: { ...live.served, [claimId]: file.size } }, stored)
        return { ok: true, file, last: file.downloads >= file.maxDownloads }
      })
    },

    async resume (code, claimId, now) {
      return await env.write(() => {
        const stored = files.get(code)
        if (stored === undefined || now >= stored.retainUntil) return null
        const until = stored.claims[claimId]
        if (until === undefined || until === 'r' || until <= now) return null
        const { claims: _claims, served: _served, ...file } = stored
        const live = liveClaims(stored, now)
        put({ ...stored, ...live, claims: { ...live.claims, [claimId]: stored.retainUntil } }, stored)
        return file
      })
    },

    async charge (code, claimId, bytes, limit, now) {
      return await env.write(() => {
        const stored = files.get(code)
        if (stored === undefined || now >= stored.retainUntil) return false
        const until = stored.claims[claimId]
        if (until === undefined || until === 'r' || until <= now) return false
        const served = (stored.served?.[claimId] ?? 0) + bytes
        if (served > limit) return false
        const live = liveClaims(stored, now)
        put({ ...stored, ...live, served: { ...live.served, [claimId]: served } }, stored)
        return true
      })
    },

    async endClaim (code, claimId, now, keepUntil, unsent = 0) {
      return await env.write(() => {
        const stored = files.get(code)
        if (stored === undefined) return null
        const { claims, served } = liveClaims(stored, now)
        if (claims[claimId] !== undefined && claims[claimId] !== 'r') {
          if (keepUntil === undefined) {
            delete claims[claimId]
            delete served[claimId]
          } else {
            claims[claimId] = keepUntil
            if (unsent > 0) served[claimId] = Math.max((served[claimId] ?? 0) - unsent, 0)
          }
        }
        const next = { ...stored, claims, served }
        put(next, stored)
        return needed(next, now)
      })
    },

    async refund (code, claimId, now) {
      await env.write(() => {
        const stored = files.get(code)
        if (stored === undefined || now >= stored.retainUntil) return
        const claim = stored.claims[claimId]
        if (claim === 'r') return
        const downloads = claim !== undefined && stored.downloads > 0 ? stored.downloads - 1 : stored.downloads
        const live = liveClaims(stored, now)
        put({ ...stored, ...live, downloads, claims: { ...live.claims, [claimId]: 'r' } }, stored)
      })
    },

    async delete (code, now) {
      return await env.write(() => {
        const stored = files.get(code)
        const s = status(stored, now)
        if (!s.ok) return s
        files.remove(code)
        env.expiry.remove([stored!.retainUntil, 'f', code])
        return s
      })
    },

    async objectNeededUntil (code, blobKey, now) {
      const stored = files.get(code)
      return stored?.blobKey === blobKey ? needed(stored, now) : null
    },

    // No tombstone: a write settles (commits or rolls back) before its promise does and has no
    // timeout, so no create can land after its caller has given up on it.
    async retract (code, blobKey) {
      await env.write(() => {
        const stored = files.get(code)
        if (stored?.blobKey !== blobKey) return
        files.remove(code)
        env.expiry.remove([stored.retainUntil, 'f', code])
      })
    }
  }
}
