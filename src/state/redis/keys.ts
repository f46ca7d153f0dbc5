/**
 * KeyStore on Redis: the records and their secret hashes in two hashes of one tag, each key
 * name's ledger under a tag of its own (layout in index.ts, scripts in key-scripts.ts).
 */
import type { Redis } from 'ioredis'
import { DropcodeError } from '../../core/errors.js'
import type { ApiKeyRecord } from '../../core/model.js'
import { opens, rotated } from '../key-rules.js'
import type { KeyStore } from '../types.js'

export interface RedisKeysOptions {
  /** The client, with the scripts of key-scripts.ts defined. */
  r: Redis
  /** Key prefix. */
  p: string
  /** Runs a command; connection trouble becomes a 503. */
  guard: <T>(op: () => Promise<T>) => Promise<T>
}

/** A rotation that keeps losing to other writes of the same record gives up after this many tries. */
const ROTATE_TRIES = 20

export function createRedisKeys ({ r, p, guard }: RedisKeysOptions): KeyStore {
  const recordKeys = [`${p}keys:{keys}`, `${p}keys:{keys}:hashes`] as const
  const ledgerKeys = (name: string) => [`${p}usage:{u:${name}}`, `${p}usage:{u:${name}}:until`, `${p}usage:{u:${name}}:meta`] as const
  const parse = (json: string | null) => json === null ? null : JSON.parse(json) as ApiKeyRecord

  return {
    async create (key) {
      return (await guard(() => r.dcKeyCreate(...recordKeys, key.name, JSON.stringify(key), ...Object.keys(key.secrets)))) === 1
    },

    async find (hash, now) {
      const key = parse(await guard(() => r.dcKeyFind(...recordKeys, hash)))
      return key !== null && opens(key, hash, now) ? key : null
    },

    async get (name) {
      return parse(await guard(() => r.hget(recordKeys[0], name)))
    },

    async list () {
      const all = await guard(() => r.hgetall(recordKeys[0]))
      // By code unit, as LMDB orders them (names are ASCII).
      return Object.keys(all).sort((a, b) => a < b ? -1 : 1).map(name => JSON.parse(all[name]!) as ApiKeyRecord)
    },

    async rotate (name, hash, oldUntil, now) {
      // Computed here (key-rules.ts), written only if the record did not change meanwhile.
      for (let i = 0; i < ROTATE_TRIES; i++) {
        const read = await guard(() => r.hget(recordKeys[0], name))
        if (read === null) return null
        const next = rotated(JSON.parse(read) as ApiKeyRecord, hash, oldUntil, now)
        const answer = await guard(() => r.dcKeyRotate(...recordKeys, name, read, JSON.stringify(next.key), hash, ...next.forgotten))
        if (answer === 'ok') return next.key
        if (answer !== 'retry') return null
      }
      // Busy rather than broken: the caller may try again.
      throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: new Error(`rotating key ${name}: its record kept changing`) })
    },

    async revoke (name) {
      return (await guard(() => r.dcKeyRevoke(...recordKeys, name))) === 1
    },

    async account (name, change, now) {
      const { add } = change
      const [ok, added, used] = await guard(() => r.dcLedgerAccount(...ledgerKeys(name), now, change.quota ?? '', change.upTo === true ? '1' : '',
        add?.item ?? '', add?.bytes ?? 0, add?.until ?? 0, ...(change.drop ?? [])))
      return { ok: ok === 1, added, used }
    },

    async usage (name, now) {
      const [bytes, lastUsedAt] = await guard(() => r.dcLedgerUsage(...ledgerKeys(name), now))
      return { bytes, lastUsedAt }
    }
  }
}
