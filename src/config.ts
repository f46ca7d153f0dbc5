/**
 * Configuration, read once from the environment (`loadConfig(process.env)` in server.ts) and
 * passed down as a typed value. Nothing else reads `process.env`; tests build configs with
 * `loadConfig({ ...vars })`.
 *
 * The schema below is the single list of settings: names, defaults and bounds. A bad value
 * stops start-up with a message naming the variable.
 */
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { Type, type Static } from 'typebox'
import { Value } from 'typebox/value'

const MiB = 1024 * 1024
const GiB = 1024 * MiB

const Bool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')])
const Int = (min: number, max: number, def?: number) =>
  Type.String({ pattern: '^[0-9]+$', ...(def === undefined ? {} : { default: String(def) }), minimum: min, maximum: max })

/** Every environment variable dropcode reads. Integer values are decimal strings checked against `minimum`/`maximum` after parsing. */
export const EnvSchema = Type.Object({
  HOST: Type.String({ default: '0.0.0.0', minLength: 1 }),
  TRUST_PROXY: Type.String({ default: 'false', pattern: '^(false|true|[0-9]{1,2}|[0-9a-fA-F.:/]+(\\s*,\\s*[0-9a-fA-F.:/]+)*)$' }),
  PORT: Int(0, 65535, 3000),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map(l => Type.Literal(l)), { default: 'info' }),
  API_KEYS: Type.Optional(Type.String({ pattern: '^\\s*[!-+\\--~]+\\s*(,\\s*[!-+\\--~]+\\s*)*$' })),
  DATA_DIR: Type.String({ default: './data', minLength: 1 }),

  STORAGE_DRIVER: Type.Optional(Type.Union([Type.Literal('fs'), Type.Literal('s3')])),
  S3_BUCKET: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' })),
  S3_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  S3_REGION: Type.String({ default: 'us-east-1', minLength: 1 }),
  S3_ACCESS_KEY_ID: Type.Optional(Type.String({ minLength: 1 })),
  S3_SECRET_ACCESS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  S3_FORCE_PATH_STYLE: Type.Optional(Bool),
  S3_PREFIX: Type.String({ default: '', pattern: '^([A-Za-z0-9!_.*\'()-]+/)*$' }),
  S3_CHECKSUM_MODE: Type.Union([Type.Literal('when_required'), Type.Literal('when_supported')], { default: 'when_required' }),
  S3_CREATE_BUCKET: Type.Union([Bool], { default: 'true' }),
  S3_PART_SIZE: Int(5 * MiB, 5 * GiB, 8 * MiB),
  S3_QUEUE_SIZE: Int(1, 64, 4),

  STATE_DRIVER: Type.Optional(Type.Union([Type.Literal('local'), Type.Literal('redis')])),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  REDIS_PREFIX: Type.String({ default: 'dropcode:', pattern: '^[A-Za-z0-9:_.-]*$' }),
  LOCAL_STATE_MAX_RECORDS: Int(1, 100_000_000, 1_000_000),

  MAX_FILE_SIZE: Int(1, Number.MAX_SAFE_INTEGER, 5 * GiB),
  MAX_DOWNLOADS: Int(1, 1_000_000, 1000),
  MAX_EXPIRY_HOURS: Int(1, 24 * 366, 24 * 30),
  MAX_TOTAL_CHUNKS: Int(1, 10_000, 10_000),
  MAX_CHUNK_SIZE: Int(1, 5 * GiB, 100 * MiB),
  SESSION_TTL_SECONDS: Int(1, 30 * 86_400, 86_400),
  RATE_LIMIT_WINDOW_SECONDS: Int(1, 86_400, 60),
  RATE_LIMIT_FAILED_LOOKUPS: Int(0, 1_000_000, 0),
  RATE_LIMIT_UPLOADS: Int(0, 1_000_000, 0),
  SWEEP_INTERVAL_SECONDS: Int(0, 86_400, 60),
  SWEEP_GRACE_SECONDS: Int(0, 86_400, 600),
  UPLOAD_TIMEOUT_SECONDS: Int(60, 7 * 86_400, 6 * 3600),
  SHUTDOWN_GRACE_SECONDS: Int(0, 3600, 30)
})
export type Env = Static<typeof EnvSchema>

export type StorageConfig =
  | { driver: 'fs', dir: string }
  | {
    driver: 's3'
    bucket: string
    endpoint: string | undefined
    region: string
    credentials: { accessKeyId: string, secretAccessKey: string } | undefined
    forcePathStyle: boolean
    /** Key prefix inside the bucket, '' or ending in '/'. */
    prefix: string
    checksumMode: 'when_required' | 'when_supported'
    createBucket: boolean
    /** Bytes per S3 part for streamed uploads (lib-storage); ≥ 5 MiB. */
    partSize: number
    /** Parts uploaded concurrently per upload; memory per upload ≈ partSize × (queueSize + 1). */
    queueSize: number
  }

export type StateConfig =
  | { driver: 'local', dir: string, maxRecords: number }
  | { driver: 'redis', url: string, prefix: string }

export interface Config {
  host: string
  /**
   * Which peers may set X-Forwarded-For / X-Request-Id: false (none: the socket address is the
   * client), a hop count, or a list of addresses/CIDRs (e.g. the load balancer's subnet).
   */
  trustProxy: false | number | string[]
  port: number
  logLevel: string
  apiKeys: string[]
  /** True when API_KEYS was unset and a random key was made for this run (server.ts logs it once). */
  apiKeyGenerated: boolean
  dataDir: string
  storage: StorageConfig
  state: StateConfig
  limits: {
    /** Bytes. */
    maxFileSize: number
    /** Upper bound accepted for max_downloads. */
    maxDownloads: number
    /** Upper bound accepted for expiry_hours. */
    maxExpiryHours: number
    /** Upper bound accepted for total_chunks (S3 allows 10,000 parts). */
    maxTotalChunks: number
    /** Bytes. */
    maxChunkSize: number
  }
  /** ms a chunked session lives without activity. */
  sessionTtlMs: number
  rateLimits: {
    /** ms of one counting window. */
    windowMs: number
    /** Failed code lookups (download/delete 404s) allowed per client address per window; 0 = no limit. */
    failedLookups: number
    /** Upload-endpoint requests allowed per API key per window; 0 = no limit. */
    uploads: number
  }
  sweeper: {
    /** ms between sweeps; 0 disables the timer (sweeps can still be run by hand). */
    intervalMs: number
    /** ms an object outlives its record's expiry, so a download started just before expiry can finish. */
    graceMs: number
  }
  /** ms after which an unfinished upload's object is considered abandoned and swept. */
  uploadTimeoutMs: number
  /** ms in-flight requests get to finish after SIGTERM before their connections are cut. */
  shutdownGraceMs: number
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const truthy = (v: string | undefined) => v === 'true' || v === '1'

/** Validates `env` and returns the typed configuration. Throws ConfigError naming the bad variable. */
export function loadConfig (env: Record<string, string | undefined>): Config {
  const known = Object.keys(EnvSchema.properties)
  const input: Record<string, string> = {}
  for (const name of known) {
    const v = env[name]
    if (v !== undefined && v !== '') input[name] = v
  }
  const withDefaults = Value.Default(EnvSchema, input) as Record<string, unknown>
  const errors = [...Value.Errors(EnvSchema, withDefaults)]
  if (errors.length > 0) {
    const e = errors[0]!
    const name = e.instancePath.replace(/^\//, '') || String((e.params as { requiredProperties?: string[] }).requiredProperties?.[0] ?? '')
    const choices = (EnvSchema.properties as Record<string, { anyOf?: Array<{ const?: string }> }>)[name]?.anyOf
    const why = choices !== undefined ? `must be one of ${choices.map(c => c.const).join(', ')}` : e.message
    throw new ConfigError(`invalid ${name}=${JSON.stringify(input[name] ?? '')}: ${why}`)
  }
  const e = withDefaults as Env
  for (const [name, schema] of Object.entries(EnvSchema.properties)) {
    const s = schema as { minimum?: number, maximum?: number }
    const raw = (e as Record<string, unknown>)[name]
    if (s.minimum === undefined || typeof raw !== 'string') continue
    const n = Number(raw)
    if (!Number.isSafeInteger(n) || n < s.minimum || n > s.maximum!) {
      throw new ConfigError(`invalid ${name}=${JSON.stringify(raw)}: must be an integer from ${s.minimum} to ${s.maximum}`)
    }
  }
  const int = (name: keyof Env) => Number(e[name])

  const dataDir = path.resolve(e.DATA_DIR)
  const storageDriver = e.STORAGE_DRIVER ?? (e.S3_BUCKET !== undefined ? 's3' : 'fs')
  const stateDriver = e.STATE_DRIVER ?? (e.REDIS_URL !== undefined ? 'redis' : 'local')

  let storage: StorageConfig
  if (storageDriver === 's3') {
    if (e.S3_BUCKET === undefined) throw new ConfigError('invalid S3_BUCKET="": required when STORAGE_DRIVER=s3')
    if ((e.S3_ACCESS_KEY_ID === undefined) !== (e.S3_SECRET_ACCESS_KEY === undefined)) {
      throw new ConfigError('invalid S3_ACCESS_KEY_ID/S3_SECRET_ACCESS_KEY: set both or neither (neither uses the AWS default credential chain)')
    }
    storage = {
      driver: 's3',
      bucket: e.S3_BUCKET,
      endpoint: e.S3_ENDPOINT,
      region: e.S3_REGION,
      credentials: e.S3_ACCESS_KEY_ID !== undefined
        ? { accessKeyId: e.S3_ACCESS_KEY_ID, secretAccessKey: e.S3_SECRET_ACCESS_KEY! }
        : undefined,
      // Custom endpoints (MinIO, Ceph) rarely have wildcard DNS for virtual-hosted buckets.
      forcePathStyle: e.S3_FORCE_PATH_STYLE !== undefined ? truthy(e.S3_FORCE_PATH_STYLE) : e.S3_ENDPOINT !== undefined,
      prefix: e.S3_PREFIX,
      checksumMode: e.S3_CHECKSUM_MODE,
      createBucket: truthy(e.S3_CREATE_BUCKET),
      partSize: int('S3_PART_SIZE'),
      queueSize: int('S3_QUEUE_SIZE')
    }
  } else {
    storage = { driver: 'fs', dir: path.join(dataDir, 'blobs') }
  }

  let state: StateConfig
  if (stateDriver === 'redis') {
    if (e.REDIS_URL === undefined) throw new ConfigError('invalid REDIS_URL="": required when STATE_DRIVER=redis')
    state = { driver: 'redis', url: e.REDIS_URL, prefix: e.REDIS_PREFIX }
  } else {
    state = { driver: 'local', dir: path.join(dataDir, 'state'), maxRecords: int('LOCAL_STATE_MAX_RECORDS') }
  }

  const apiKeys = (e.API_KEYS ?? '').split(',').map(k => k.trim()).filter(k => k !== '')
  const apiKeyGenerated = apiKeys.length === 0
  if (apiKeyGenerated) apiKeys.push(randomBytes(24).toString('base64url'))

  const trustProxy = e.TRUST_PROXY === 'false'
    ? false
    : /^[0-9]+$/.test(e.TRUST_PROXY) ? Number(e.TRUST_PROXY) : e.TRUST_PROXY.split(',').map(a => a.trim())
  if (e.TRUST_PROXY === 'true') throw new ConfigError('invalid TRUST_PROXY="true": trusting every peer lets any client spoof its address; give a hop count or the proxies\' addresses/CIDRs')

  return {
    host: e.HOST,
    trustProxy,
    port: int('PORT'),
    logLevel: e.LOG_LEVEL,
    apiKeys,
    apiKeyGenerated,
    dataDir,
    storage,
    state,
    limits: {
      maxFileSize: int('MAX_FILE_SIZE'),
      maxDownloads: int('MAX_DOWNLOADS'),
      maxExpiryHours: int('MAX_EXPIRY_HOURS'),
      maxTotalChunks: int('MAX_TOTAL_CHUNKS'),
      maxChunkSize: int('MAX_CHUNK_SIZE')
    },
    sessionTtlMs: int('SESSION_TTL_SECONDS') * 1000,
    rateLimits: {
      windowMs: int('RATE_LIMIT_WINDOW_SECONDS') * 1000,
      failedLookups: int('RATE_LIMIT_FAILED_LOOKUPS'),
      uploads: int('RATE_LIMIT_UPLOADS')
    },
    sweeper: {
      intervalMs: int('SWEEP_INTERVAL_SECONDS') * 1000,
      graceMs: int('SWEEP_GRACE_SECONDS') * 1000
    },
    uploadTimeoutMs: int('UPLOAD_TIMEOUT_SECONDS') * 1000,
    shutdownGraceMs: int('SHUTDOWN_GRACE_SECONDS') * 1000
  }
}
