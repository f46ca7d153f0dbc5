/** CleanupIndex on LMDB: `cleanup` holds each key's deadline and owners, `due` orders them. */
import type { Owner } from '../../core/model.js'
import type { CleanupIndex, DueObject } from '../types.js'
import type { LmdbEnv } from './env.js'

export function createLmdbCleanup (env: LmdbEnv): CleanupIndex {
  const { cleanup, due } = env
  const move = (blobKey: string, deadline: number, owners: string[]) => {
    const old = cleanup.get(blobKey)
    if (old !== undefined) due.remove([old.deadline, blobKey])
    cleanup.put(blobKey, { deadline, owners })
    due.put([deadline, blobKey], 1)
  }

  return {
    async schedule (blobKey, deadline, owner) {
      await env.write(() => {
        const owners = cleanup.get(blobKey)?.owners ?? []
        move(blobKey, deadline, owner === undefined || owners.includes(owner) ? owners : [...owners, owner])
      })
    },

    async lease (now, limit, leaseUntil) {
      return await env.write(() => {
        const leased: DueObject[] = []
        const keys = [...due.getKeys({ start: [0, ''], end: [now, '\uffff'], limit })]
        for (const [, blobKey] of keys) {
          // A publish still pending at its deadline is given up (see CleanupIndex.lease).
          const owners = (cleanup.get(blobKey)?.owners ?? []).map(o => o.startsWith('p:') ? `x:${o.slice(2)}` : o)
          leased.push({ blobKey, owners: owners as Owner[] })
        }
        for (const { blobKey, owners } of leased) move(blobKey, leaseUntil, owners)
        return leased
      })
    },

    async forget (blobKey) {
      await env.write(() => {
        const old = cleanup.get(blobKey)
        if (old === undefined) return
        due.remove([old.deadline, blobKey])
        cleanup.remove(blobKey)
      })
    },

    async release (leaseUntil, now) {
      await env.write(() => {
        const keys = [...due.getKeys({ start: [leaseUntil, ''], end: [leaseUntil, '\uffff'] })]
        for (const [, blobKey] of keys) move(blobKey, now, cleanup.get(blobKey)?.owners ?? [])
      })
    },

    async confirm (blobKey, deadline, code) {
      return await env.write(() => {
        const owners = cleanup.get(blobKey)?.owners ?? []
        if (!owners.includes(`p:${code}`)) return false
        move(blobKey, deadline, owners.map(o => o === `p:${code}` ? `f:${code}` : o))
        return true
      })
    },

    async abandon (blobKey, code, now) {
      await env.write(() => {
        const owners = (cleanup.get(blobKey)?.owners ?? []).filter(o => o.startsWith('s:') || o.slice(2) !== code)
        move(blobKey, now, [...owners, `x:${code}`])
      })
    },

    async countDue (now) {
      return due.getKeysCount({ start: [0, ''], end: [now, '\uffff'] })
    }
  }
}
