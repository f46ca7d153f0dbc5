/**
 * KeyStore on LMDB: key records by name, a secret hash → name index, and each name's ledger
 * (its items, the items by end, and their total); see env.ts for the layout. Everything lives in
 * the database, never in memory, because several processes may share one DATA_DIR: each step
 * that reads then writes is one write transaction. A key's ended items are dropped by its next
 * `account`, or by housekeeping (`purgeLedgers`) for a key that uploads no more; until then they
 * only take disk space, as `usage` and `account` never count them.
 */
import type { KeyStore, LedgerChange } from '../types.js'
import { opens, rotated } from '../key-rules.js'
import type { LedgerItem, LmdbEnv } from './env.js'

export function createLmdbKeys (env: LmdbEnv): KeyStore & { purgeLedgers (now: number, limit: number): number } {
  const { keys, keyHashes, ledger, ledgerDue, ledgerTotals } = env

  /** Items of `name` whose end has passed at `now`, with their bytes (their ledgerDue keys: [name, until, item]). */
  const ended = (name: string, now: number) => {
    const out = new Map<string, number>()
    for (const [, , item] of ledgerDue.getKeys({ start: [name, 0, ''], end: [name, now, '\uffff'] })) {
      const stored = ledger.get([name, item])
      if (stored !== undefined && stored.until <= now) out.set(item, stored.bytes)
    }
    return out
  }

  /**
   * Writes the items of `name` in `next` (null: removed), keeping ledgerDue in step, and the
   * total. Call inside a write, after every read.
   */
  const save = (name: string, next: Map<string, LedgerItem | null>, bytes: number, lastUsedAt: number) => {
    for (const [item, value] of next) {
      const previous = ledger.get([name, item])
      if (previous !== undefined) ledgerDue.remove([name, previous.until, item])
      if (value === null) {
        ledger.remove([name, item])
      } else {
        ledger.put([name, item], value)
        ledgerDue.put([name, value.until, item], 1)
      }
    }
    if (bytes === 0 && lastUsedAt === 0) ledgerTotals.remove(name)
    else ledgerTotals.put(name, { bytes, lastUsedAt })
  }

  return {
    /** Drops up to `limit` ended ledger items of any key (call inside a write). @returns items dropped */
    purgeLedgers (now, limit) {
      let n = 0
      for (const name of [...ledgerTotals.getKeys()]) { // collected first: the loop writes
        if (n >= limit) break
        const gone = [...ended(name, now)].slice(0, limit - n)
        if (gone.length === 0) continue
        const total = ledgerTotals.get(name)!
        save(name, new Map(gone.map(([item]) => [item, null])), total.bytes - gone.reduce((sum, [, bytes]) => sum + bytes, 0), total.lastUsedAt)
        n += gone.length
      }
      return n
    },

    async create (key) {
      return await env.write(() => {
        if (keys.get(key.name) !== undefined) return false
        const hashes = Object.keys(key.secrets)
        if (hashes.some(h => keyHashes.get(h) !== undefined)) return false
        keys.put(key.name, key)
        for (const h of hashes) keyHashes.put(h, key.name)
        return true
      })
    },

    async find (hash, now) {
      const name = keyHashes.get(hash)
      const key = name === undefined ? undefined : keys.get(name)
      return key !== undefined && opens(key, hash, now) ? key : null
    },

    async get (name) {
      return keys.get(name) ?? null
    },

    async list () {
      // Ordered-binary keys sort by UTF-8 bytes: names (ASCII) come out by name.
      return [...keys.getRange()].map(({ value }) => value)
    },

    async rotate (name, hash, oldUntil, now) {
      return await env.write(() => {
        const key = keys.get(name)
        if (key === undefined || keyHashes.get(hash) !== undefined) return null
        const next = rotated(key, hash, oldUntil, now)
        keys.put(name, next.key)
        for (const h of next.forgotten) if (keyHashes.get(h) === name) keyHashes.remove(h)
        keyHashes.put(hash, name)
        return next.key
      })
    },

    async revoke (name) {
      return await env.write(() => {
        const key = keys.get(name)
        if (key === undefined) return false
        const mapped = Object.keys(key.secrets).filter(h => keyHashes.get(h) === name)
        keys.remove(name)
        for (const h of mapped) keyHashes.remove(h)
        return true
      })
    },

    async account (name, change: LedgerChange, now) {
      return await env.write(() => {
        const total = ledgerTotals.get(name) ?? { bytes: 0, lastUsedAt: 0 }
        // Ended items go whatever happens to the change.
        const purge = new Map<string, LedgerItem | null>()
        let purged = total.bytes
        for (const [item, bytes] of ended(name, now)) {
          purge.set(item, null)
          purged -= bytes
        }
        const next = new Map(purge)
        const current = (item: string) => {
          const pending = next.get(item)
          if (pending !== undefined) return pending
          return ledger.get([name, item]) ?? null
        }
        let used = purged
        for (const item of change.drop ?? []) {
          used -= current(item)?.bytes ?? 0
          next.set(item, null)
        }
        let added = 0
        if (change.add !== undefined) {
          const { item, until } = change.add
          let bytes = change.add.bytes
          if (change.quota !== undefined && bytes > 0) {
            if (change.upTo === true) bytes = Math.min(bytes, change.quota - used)
            if (bytes <= 0 || used + bytes > change.quota) {
              save(name, purge, purged, total.lastUsedAt)
              return { ok: false, added: 0, used: purged }
            }
          }
          const held = current(item)?.bytes ?? 0
          // An item that falls to nothing, or whose end has passed, holds nothing: it goes.
          if (held + bytes <= 0 || until <= now) {
            next.set(item, null)
            added = 0 - held // not -0
          } else {
            next.set(item, { bytes: held + bytes, until })
            added = bytes
          }
          used += added
        }
        save(name, next, used, change.quota !== undefined ? now : total.lastUsedAt)
        return { ok: true, added, used }
      })
    },

    async usage (name, now) {
      const total = ledgerTotals.get(name)
      if (total === undefined) return { bytes: 0, lastUsedAt: 0 }
      let bytes = total.bytes
      for (const held of ended(name, now).values()) bytes -= held
      return { bytes, lastUsedAt: total.lastUsedAt }
    }
  }
}
