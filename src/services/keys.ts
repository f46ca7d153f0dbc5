/**
 * API keys as data (the key ring): who a request's X-Client-Key is, what it may do, and the
 * keys API's operations. Keys are kept in the state store (KeyStore) by name, each secret only
 * as its SHA-256: a secret is 256 random bits, so no dictionary or brute force reaches it, and a
 * slow password hash would only slow every request; what a copy of the state gives is hashes
 * that open nothing. Keys from API_KEYS (and the one generated under DATA_DIR when it is unset)
 * are admin keys held in memory, named `env-…` after a hash of the secret, so every instance
 * names them alike.
 *
 * Revocation reaches every instance within `cacheMs` (500 ms): a looked-up key is remembered
 * that long, then asked of the store again (one read of a small record; concurrent requests
 * with one secret share the read). A key's limits are its own where set, and never above the
 * service's (MAX_FILE_SIZE, …).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import type { ApiKeyRecord, KeyLimits } from '../core/model.js'
import type { KeyStore } from '../state/index.js'

/** The limits a request's key works under: its own, capped by the service's. */
export interface EffectiveLimits {
  maxFileSize: number
  maxDownloads: number
  maxExpiryHours: number
  /** Bytes; undefined: no quota. */
  quotaBytes: number | undefined
  maxOpenSessions: number
  /** undefined: no per-key rate beyond RATE_LIMIT_UPLOADS. */
  uploadsPerMinute: number | undefined
}

/** The key a request authenticated with. */
export interface ApiKey {
  /** Its identity: what owns its sessions, files and usage; shown in logs and metrics (never the secret). */
  name: string
  admin: boolean
  source: 'store' | 'environment'
  /** Its own limits, as stored (absent: the service's). */
  own: KeyLimits
  limits: EffectiveLimits
  /** Whose each limit is, for refusals: the key's name or "service". */
  limitOf (limit: keyof KeyLimits): string
}

/** What may be given when creating a key. */
export interface NewKey {
  name: string
  admin: boolean
  /** Epoch ms from which it is refused; undefined: never. */
  expiresAt?: number | undefined
  limits: KeyLimits
}

/** Names: safe in Redis key names and metric labels; `env-` is kept for keys from API_KEYS. */
export const KEY_NAME = /^[A-Za-z0-9._-]{1,64}$/

export const secretHash = (secret: string) => createHash('sha256').update(secret).digest('hex')
/** The name of a key from API_KEYS: stable across instances and restarts, revealing nothing of it. */
export const envKeyName = (secret: string) => `env-${createHash('sha256').update(`dropcode key id\0${secret}`).digest().subarray(0, 6).toString('hex')}`
/** A new secret: 256 random bits, with a prefix that secret scanners and people recognise. */
export const newSecret = () => `dck_${randomBytes(32).toString('base64url')}`

type ServiceLimits = Pick<Config, 'limits' | 'maxOpenSessionsPerKey'>

/** The service's value of each key limit (none: no such service-wide limit). */
function serviceLimit (config: ServiceLimits, limit: keyof KeyLimits): number | undefined {
  switch (limit) {
    case 'maxFileSize': return config.limits.maxFileSize
    case 'maxDownloads': return config.limits.maxDownloads
    case 'maxExpiryHours': return config.limits.maxExpiryHours
    case 'maxOpenSessions': return config.maxOpenSessionsPerKey
    default: return undefined
  }
}

export const LIMIT_NAMES = ['maxFileSize', 'maxDownloads', 'maxExpiryHours', 'quotaBytes', 'maxOpenSessions', 'uploadsPerMinute'] as const satisfies ReadonlyArray<keyof KeyLimits>
/** The wire name of each limit (the keys API, refusals). */
export const LIMIT_FIELD = {
  maxFileSize: 'max_file_size',
  maxDownloads: 'max_downloads',
  maxExpiryHours: 'max_expiry_hours',
  quotaBytes: 'quota_bytes',
  maxOpenSessions: 'max_open_sessions',
  uploadsPerMinute: 'uploads_per_minute'
} as const satisfies Record<keyof KeyLimits, string>

function apiKey (config: ServiceLimits, name: string, admin: boolean, source: ApiKey['source'], own: KeyLimits): ApiKey {
  const capped = (limit: keyof KeyLimits) => {
    const mine = own[limit]
    const service = serviceLimit(config, limit)
    return mine === undefined ? service : service === undefined ? mine : Math.min(mine, service)
  }
  return {
    name,
    admin,
    source,
    own,
    limits: {
      maxFileSize: capped('maxFileSize')!,
      maxDownloads: capped('maxDownloads')!,
      maxExpiryHours: capped('maxExpiryHours')!,
      quotaBytes: capped('quotaBytes'),
      maxOpenSessions: capped('maxOpenSessions')!,
      uploadsPerMinute: capped('uploadsPerMinute')
    },
    limitOf: limit => own[limit] !== undefined && (serviceLimit(config, limit) ?? Infinity) >= own[limit] ? name : 'service'
  }
}

/** A refusal by a limit: the catalogue's code, with which limit, its value and whose it is. */
export function overLimit (key: ApiKey, limit: keyof KeyLimits, code: 'DROPCODE_FILE_TOO_LARGE' | 'DROPCODE_INVALID_FIELD' | 'DROPCODE_QUOTA_EXCEEDED' | 'DROPCODE_TOO_MANY_SESSIONS' | 'DROPCODE_RATE_LIMITED', message: string, details: Record<string, unknown> = {}) {
  const value = limit === 'quotaBytes' ? key.limits.quotaBytes : key.limits[limit]
  return new DropcodeError(code, message, { limit: LIMIT_FIELD[limit], limit_value: value, limit_of: key.limitOf(limit), ...details })
}

/** Whose limit, for messages: "this API key (ci-main)" or "this service". */
export const whose = (key: ApiKey, limit: keyof KeyLimits) => key.limitOf(limit) === 'service' ? 'this service' : `this API key (${key.name})`

export interface KeyRingOptions {
  store: KeyStore
  /** Secrets of the admin keys from API_KEYS (or the generated one). */
  envKeys: readonly string[]
  config: ServiceLimits
  now: () => number
  /** ms a looked-up key is trusted before the store is asked again (how long a revocation takes to reach an instance). */
  cacheMs?: number
}

/** Lookups remembered at most (a flood of wrong keys clears the cache instead of growing it). */
const CACHE_ENTRIES = 10_000

export type KeyRing = ReturnType<typeof createKeyRing>

export function createKeyRing (opts: KeyRingOptions) {
  const { store, config, now } = opts
  const cacheMs = opts.cacheMs ?? 500
  const env = opts.envKeys.map(secret => ({ digest: createHash('sha256').update(secret).digest(), key: apiKey(config, envKeyName(secret), true, 'environment', {}) }))
  const cache = new Map<string, { at: number, key: Promise<ApiKey | null> }>()
  const fromRecord = (r: ApiKeyRecord) => apiKey(config, r.name, r.admin, 'store', r.limits)

  function lookup (hash: string): Promise<ApiKey | null> {
    const hit = cache.get(hash)
    if (hit !== undefined && now() - hit.at < cacheMs) return hit.key
    if (cache.size >= CACHE_ENTRIES) cache.clear()
    const key = store.find(hash, now()).then(r => r === null ? null : fromRecord(r))
    const entry = { at: now(), key }
    cache.set(hash, entry)
    // A failed read is not remembered: the next request asks again.
    key.catch(() => { if (cache.get(hash) === entry) cache.delete(hash) })
    return key
  }

  function check (input: NewKey) {
    if (!KEY_NAME.test(input.name) || input.name.startsWith('env-')) {
      throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Field "name" must be 1–64 letters, digits, dots, underscores and hyphens, not starting with "env-" (kept for keys from API_KEYS).')
    }
    for (const limit of LIMIT_NAMES) {
      const value = input.limits[limit]
      if (value === undefined) continue
      const service = serviceLimit(config, limit)
      if (!Number.isSafeInteger(value) || value < (limit === 'quotaBytes' ? 0 : 1)) throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "${LIMIT_FIELD[limit]}" must be a whole number of at least ${limit === 'quotaBytes' ? 0 : 1}.`, { limit: LIMIT_FIELD[limit] })
      if (service !== undefined && value > service) {
        throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "${LIMIT_FIELD[limit]}" is ${value}, above the service's own limit of ${service}.`, { limit: LIMIT_FIELD[limit], limit_value: service, limit_of: 'service' })
      }
    }
  }

  return {
    /** The key a secret opens, or null: keys from API_KEYS (compared in constant time), then the store. */
    async authenticate (secret: string | undefined): Promise<ApiKey | null> {
      const presented = createHash('sha256').update(secret ?? '').digest()
      // Every environment key is compared (no early exit), so timing tells none of them.
      let found: ApiKey | null = null
      for (const e of env) if (timingSafeEqual(presented, e.digest)) found = e.key
      if (found !== null || secret === undefined || secret === '') return found
      return await lookup(presented.toString('hex'))
    },

    /** The admin keys of this instance's environment (for listing; the store knows nothing of them). */
    environmentKeys: (): ApiKey[] => env.map(e => e.key),

    /** Creates a key; answers its one secret. 409 KEY_EXISTS for a taken name. */
    async create (input: NewKey): Promise<{ record: ApiKeyRecord, secret: string }> {
      check(input) // (which refuses env- names: an API_KEYS key's name cannot be taken)
      const secret = newSecret()
      const record: ApiKeyRecord = {
        name: input.name,
        admin: input.admin,
        createdAt: now(),
        ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
        limits: input.limits,
        secrets: { [secretHash(secret)]: 0 }
      }
      if (!await store.create(record, now())) throw new DropcodeError('DROPCODE_KEY_EXISTS', `An API key named "${input.name}" exists already.`)
      return { record, secret }
    },

    list: () => store.list(),

    /** Revokes a key: refused by this instance at once, by every other within `cacheMs`. */
    async revoke (name: string): Promise<void> {
      const record = await store.get(name)
      if (!await store.revoke(name)) throw new DropcodeError('DROPCODE_KEY_NOT_FOUND', `No API key named "${name}" in the key store (keys from API_KEYS are managed there).`)
      for (const hash of Object.keys(record?.secrets ?? {})) cache.delete(hash)
    },

    /** A new secret for `name`; the others keep working for `graceMs` more. */
    async rotate (name: string, graceMs: number): Promise<{ record: ApiKeyRecord, secret: string }> {
      const secret = newSecret()
      const record = await store.rotate(name, secretHash(secret), now() + graceMs, now())
      if (record === null) throw new DropcodeError('DROPCODE_KEY_NOT_FOUND', `No API key named "${name}" in the key store (keys from API_KEYS are managed there).`)
      return { record, secret }
    },

    usage: (name: string) => store.usage(name, now())
  }
}
