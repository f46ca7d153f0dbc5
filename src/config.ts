/**
 * Configuration, read once from the environment (`loadConfig(process.env)` in server.ts) and
 * passed down as a typed value. Nothing else reads `process.env`; tests build configs with
 * `loadConfig({ ...vars })`.
 *
 * The schema below is the single list of settings: names, defaults and bounds (TypeBox checks
 * them all, whole numbers included). A bad value stops start-up with a message naming the
 * variable. `Config`, the typed value, is what `loadConfig` builds from the checked settings:
 * written once, there, with each field's meaning. Each consumer declares the settings it reads
 * (`Pick<Config, 'limits'>`), so its options say what it depends on.
 */
import path from 'node:path'
import { Type, type Static } from 'typebox'
import { Value } from 'typebox/value'

const MiB = 1024 * 1024
const GiB = 1024 * MiB

const Bool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')])
/** A whole number from min to max, written in decimal digits only (no units, signs or exponents). */
const Int = (min: number, max: number, def: number) => Type.Integer({ minimum: min, maximum: max, default: def })

/** One host:port (a name, an IPv4 address or a bracketed IPv6 address), or a comma-separated list of them. */
const HOST_PORT = '\\s*([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\]):[0-9]{1,5}\\s*'
const HOST_PORTS = `^${HOST_PORT}(,${HOST_PORT})*$`

/** Every environment variable dropcode reads, with its default and bounds: the one list of settings. */
export const EnvSchema = Type.Object({
  HOST: Type.String({ default: '0.0.0.0', minLength: 1 }),
  TRUST_PROXY: Type.String({ description: 'false, a hop count such as 1, or the proxies\' own comma-separated addresses/CIDRs such as 10.0.0.5,10.0.0.6', default: 'false', pattern: '^(false|true|[0-9]{1,2}|[0-9a-fA-F.:/]+(\\s*,\\s*[0-9a-fA-F.:/]+)*)$' }),
  PORT: Int(0, 65535, 3000),
  METRICS_HOST: Type.String({ default: '127.0.0.1', minLength: 1 }),
  METRICS_PORT: Type.String({ description: 'a port from 0 to 65535, or off', default: '9464', pattern: '^([0-9]{1,5}|off)$' }),
  CORS_ORIGINS: Type.String({ description: 'empty (off), * (any origin), or comma-separated origins such as https://tools.example.com,http://localhost:5173', default: '', pattern: '^\\s*(\\*|https?://[^\\s,/]+(\\s*,\\s*https?://[^\\s,/]+)*)?\\s*$' }),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map(l => Type.Literal(l)), { default: 'info' }),
  LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { default: 'json' }),
  API_KEYS: Type.Optional(Type.String({ description: 'comma-separated keys of printable ASCII without spaces, such as API_KEYS=key-one,key-two', pattern: '^\\s*[!-+\\--~]+\\s*(,\\s*[!-+\\--~]+\\s*)*$' })),
  DATA_DIR: Type.String({ default: './data', minLength: 1 }),

  STORAGE_DRIVER: Type.Optional(Type.Union([Type.Literal('fs'), Type.Literal('s3')])),
  S3_BUCKET: Type.Optional(Type.String({ description: 'an S3 bucket name: 3–63 lowercase letters, digits, dots and hyphens, such as dropcode-files', pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' })),
  S3_ENDPOINT: Type.Optional(Type.String({ description: 'an http(s) URL such as http://127.0.0.1:9000', pattern: '^https?://[^\\s]+$' })),
  S3_REGION: Type.String({ default: 'us-east-1', minLength: 1 }),
  S3_ACCESS_KEY_ID: Type.Optional(Type.String({ minLength: 1 })),
  S3_SECRET_ACCESS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  S3_FORCE_PATH_STYLE: Type.Optional(Bool),
  S3_PREFIX: Type.String({ description: 'empty, or path segments each ending in /, such as dropcode/', default: '', pattern: '^([A-Za-z0-9!_.*\'()-]+/)*$' }),
  S3_CHECKSUM_MODE: Type.Union([Type.Literal('when_required'), Type.Literal('when_supported')], { default: 'when_required' }),
  S3_CREATE_BUCKET: Type.Union([Bool], { default: 'true' }),
  S3_PART_SIZE: Int(5 * MiB, 5 * GiB, 8 * MiB),
  S3_QUEUE_SIZE: Int(1, 64, 2),
  S3_UPLOAD_MEMORY: Int(16 * MiB, 64 * GiB, 128 * MiB),

  STATE_DRIVER: Type.Optional(Type.Union([Type.Literal('local'), Type.Literal('redis')])),
  REDIS_URL: Type.Optional(Type.String({ description: 'a Redis URL such as redis://localhost:6379 or rediss://:password@host:6380/0', pattern: '^rediss?://' })),
  REDIS_CLUSTER_NODES: Type.Optional(Type.String({ description: 'comma-separated host:port seed nodes of a Redis Cluster, such as 10.0.0.1:6379,10.0.0.2:6379', pattern: HOST_PORTS })),
  REDIS_SENTINELS: Type.Optional(Type.String({ description: 'comma-separated host:port of Redis Sentinels, such as 10.0.0.1:26379,10.0.0.2:26379', pattern: HOST_PORTS })),
  REDIS_SENTINEL_NAME: Type.String({ description: 'the master name the Sentinels monitor, such as mymaster', default: 'mymaster', pattern: '^[A-Za-z0-9._-]+$' }),
  REDIS_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  REDIS_PREFIX: Type.String({ description: 'letters, digits and : _ . - only, such as dropcode:', default: 'dropcode:', pattern: '^[A-Za-z0-9:_.-]*$' }),
  LOCAL_STATE_MAX_RECORDS: Int(1, 100_000_000, 1_000_000),

  MAX_FILE_SIZE: Int(1, Number.MAX_SAFE_INTEGER, 5 * GiB),
  MAX_DOWNLOADS: Int(1, 1_000_000, 1000),
  MAX_EXPIRY_HOURS: Int(1, 24 * 366, 24 * 30),
  MAX_TOTAL_CHUNKS: Int(1, 10_000, 10_000),
  MAX_CHUNK_SIZE: Int(1, 5 * GiB, 100 * MiB),
  SESSION_TTL_SECONDS: Int(1, 30 * 86_400, 86_400),
  MAX_OPEN_SESSIONS_PER_KEY: Int(1, 1_000_000, 1000),
  RATE_LIMIT_WINDOW_SECONDS: Int(1, 86_400, 60),
  RATE_LIMIT_FAILED_LOOKUPS: Int(0, 1_000_000, 10),
  RATE_LIMIT_UPLOADS: Int(0, 1_000_000, 0),
  SWEEP_INTERVAL_SECONDS: Int(0, 86_400, 60),
  SWEEP_GRACE_SECONDS: Int(0, 86_400, 600),
  UPLOAD_TIMEOUT_SECONDS: Int(60, 7 * 86_400, 6 * 3600),
  DOWNLOAD_RESUME_SECONDS: Int(0, 7 * 86_400, 3600),
  MAX_CONCURRENT_UPLOADS: Int(0, 100_000, 4096),
  MAX_CONCURRENT_DOWNLOADS: Int(0, 100_000, 4096),
  SHED_EVENT_LOOP_DELAY_MS: Int(0, 60_000, 1000),
  SHED_HEAP_USED_PERCENT: Int(0, 100, 90),
  MIN_TRANSFER_BYTES: Int(0, 1024 * MiB, 32 * 1024),
  MIN_TRANSFER_WINDOW_SECONDS: Int(1, 3600, 30),
  LINGER_SECONDS: Int(0, 600, 20),
  LINGER_MAX_BYTES: Int(0, Number.MAX_SAFE_INTEGER, 64 * MiB),
  CHUNK_LOCK_SECONDS: Int(3, 600, 15),
  DRAIN_DELAY_SECONDS: Int(0, 600, 5),
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
    /** Bytes per S3 part (src/blob/s3/parts.ts); ≥ 5 MiB. */
    partSize: number
    /** Parts uploaded concurrently per upload. */
    queueSize: number
    /** Bytes of slabs (64 KiB) shared by all uploads of the instance (at least two parts). */
    uploadMemory: number
  }

export interface HostPort {
  host: string
  port: number
}

/** How to reach Redis: one server by URL, a Redis Cluster by its seed nodes, or the master that Sentinels name. */
export type RedisConnection =
  | { mode: 'single', url: string }
  /** `password` (REDIS_PASSWORD) is sent to every node. */
  | { mode: 'cluster', nodes: HostPort[], password: string | undefined }
  /** `password` (REDIS_PASSWORD) is the data nodes' password; the Sentinels themselves are reached without one. */
  | { mode: 'sentinel', sentinels: HostPort[], name: string, password: string | undefined }

/** A Redis URL without its password, for messages. */
const safeUrl = (url: string) => url.replace(/\/\/([^@/]*)@/, '//***@')

/** Where Redis is, for messages (never with a password), and the setting that says so. */
export function describeRedis (c: RedisConnection): { where: string, setting: string } {
  const list = (nodes: HostPort[]) => nodes.map(n => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(',')
  if (c.mode === 'single') return { where: `Redis at ${safeUrl(c.url)}`, setting: 'REDIS_URL' }
  if (c.mode === 'cluster') return { where: `Redis Cluster at ${list(c.nodes)}`, setting: 'REDIS_CLUSTER_NODES' }
  return { where: `Redis master ${c.name} of the Sentinels at ${list(c.sentinels)}`, setting: 'REDIS_SENTINELS' }
}

export type StateConfig =
  | { driver: 'local', dir: string, maxRecords: number }
  | { driver: 'redis', redis: RedisConnection, prefix: string }

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const truthy = (v: string | undefined) => v === 'true' || v === '1'

const hostPorts = (list: string): HostPort[] => list.split(',').map(entry => {
  const m = /^\s*\[?(.*?)\]?:([0-9]+)\s*$/.exec(entry)!
  return { host: m[1]!, port: Number(m[2]) }
})

/** Exactly one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS picks how Redis is reached. */
function redisConnection (e: Env, targets: Array<'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS'>): RedisConnection {
  if (targets.length === 0) throw new ConfigError('invalid REDIS_URL="": required when STATE_DRIVER=redis (or REDIS_CLUSTER_NODES for a Redis Cluster, REDIS_SENTINELS for Sentinel)')
  if (targets.length > 1) {
    throw new ConfigError(`invalid ${targets.join(' + ')}: set only one of REDIS_URL (one Redis), REDIS_CLUSTER_NODES (a Redis Cluster) or REDIS_SENTINELS (Redis with Sentinel)`)
  }
  for (const [name, value] of [['REDIS_CLUSTER_NODES', e.REDIS_CLUSTER_NODES], ['REDIS_SENTINELS', e.REDIS_SENTINELS]] as const) {
    const bad = value === undefined ? undefined : hostPorts(value).find(n => n.port < 1 || n.port > 65535)
    if (bad !== undefined) throw new ConfigError(`invalid ${name}=${JSON.stringify(value)}: port ${bad.port} of ${bad.host} is not from 1 to 65535`)
  }
  if (e.REDIS_URL !== undefined) {
    if (e.REDIS_PASSWORD !== undefined) throw new ConfigError('invalid REDIS_PASSWORD: with REDIS_URL, put the password in the URL (redis://:password@host:6379)')
    return { mode: 'single', url: e.REDIS_URL }
  }
  if (e.REDIS_CLUSTER_NODES !== undefined) return { mode: 'cluster', nodes: hostPorts(e.REDIS_CLUSTER_NODES), password: e.REDIS_PASSWORD }
  return { mode: 'sentinel', sentinels: hostPorts(e.REDIS_SENTINELS!), name: e.REDIS_SENTINEL_NAME, password: e.REDIS_PASSWORD }
}

type Prop = { type?: string, anyOf?: Array<{ const?: string }>, description?: string, minimum?: number, maximum?: number }
const PROPS = EnvSchema.properties as Record<string, Prop>

/** Why a value of `name` is refused, for people. */
function expected (name: string, fallback: string): string {
  const prop = PROPS[name]
  if (prop?.type === 'integer') return `must be a whole number (digits only, no units) from ${prop.minimum} to ${prop.maximum}`
  if (prop?.anyOf !== undefined) return `must be one of ${prop.anyOf.map(c => c.const).join(', ')}`
  return prop?.description !== undefined ? `must be ${prop.description}` : fallback
}

/**
 * The environment checked against EnvSchema: defaults filled in, whole numbers converted (after
 * checking they are digits: TypeBox would also take 0x10, 1e3 or 5.0). Throws ConfigError
 * naming the first bad variable.
 */
function readEnv (env: Record<string, string | undefined>): Env {
  const input: Record<string, string> = {}
  for (const name of Object.keys(PROPS)) {
    const v = env[name]
    if (v === undefined || v === '') continue
    if (PROPS[name]!.type === 'integer' && !/^[0-9]+$/.test(v)) throw new ConfigError(`invalid ${name}=${JSON.stringify(v)}: ${expected(name, '')}`)
    input[name] = v
  }
  const read = Value.Convert(EnvSchema, Value.Default(EnvSchema, { ...input }))
  const first = [...Value.Errors(EnvSchema, read)][0]
  if (first !== undefined) {
    const name = first.instancePath.replace(/^\//, '') || String((first.params as { requiredProperties?: string[] }).requiredProperties?.[0] ?? '')
    throw new ConfigError(`invalid ${name}=${JSON.stringify(input[name] ?? '')}: ${expected(name, first.message)}`)
  }
  return read as Env
}

/**
 * Validates `env` and returns the typed configuration (its type, Config, is what this returns:
 * written once, here). Throws ConfigError naming the bad variable.
 */
export function loadConfig (env: Record<string, string | undefined>) {
  const e = readEnv(env)
  const dataDir = path.resolve(e.DATA_DIR)
  const storageDriver = e.STORAGE_DRIVER ?? (e.S3_BUCKET !== undefined ? 's3' : 'fs')
  const redisTargets = (['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const).filter(name => e[name] !== undefined)
  const stateDriver = e.STATE_DRIVER ?? (redisTargets.length > 0 ? 'redis' : 'local')

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
      partSize: e.S3_PART_SIZE,
      queueSize: e.S3_QUEUE_SIZE,
      uploadMemory: e.S3_UPLOAD_MEMORY
    }
  } else {
    storage = { driver: 'fs', dir: path.join(dataDir, 'blobs') }
  }

  let state: StateConfig
  if (stateDriver === 'redis') {
    state = { driver: 'redis', redis: redisConnection(e, redisTargets), prefix: e.REDIS_PREFIX }
  } else {
    state = { driver: 'local', dir: path.join(dataDir, 'state'), maxRecords: e.LOCAL_STATE_MAX_RECORDS }
  }

  const metricsPort = e.METRICS_PORT === 'off' ? undefined : Number(e.METRICS_PORT)
  if (metricsPort !== undefined && metricsPort > 65535) throw new ConfigError(`invalid METRICS_PORT=${JSON.stringify(e.METRICS_PORT)}: must be a port from 0 to 65535, or off`)
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === e.PORT) throw new ConfigError(`invalid METRICS_PORT=${JSON.stringify(e.METRICS_PORT)}: must differ from PORT (metrics have their own listener), or be off`)

  const apiKeys = (e.API_KEYS ?? '').split(',').map(k => k.trim()).filter(k => k !== '')

  const trustProxy: false | number | string[] = e.TRUST_PROXY === 'false'
    ? false
    : /^[0-9]+$/.test(e.TRUST_PROXY) ? Number(e.TRUST_PROXY) : e.TRUST_PROXY.split(',').map(a => a.trim())
  if (e.TRUST_PROXY === 'true') throw new ConfigError('invalid TRUST_PROXY="true": trusting every peer lets any client spoof its address; give a hop count or the proxies\' addresses/CIDRs')

  return {
    host: e.HOST,
    /**
     * Which peers may set X-Forwarded-For / X-Request-Id: false (none: the socket address is the
     * client), a hop count, or a list of addresses/CIDRs (e.g. the load balancer's subnet).
     */
    trustProxy,
    port: e.PORT,
    /**
     * Where Prometheus metrics are served (GET /metrics), apart from the service port; false with
     * METRICS_PORT=off. Port 0: any free port (tests).
     */
    metrics: metricsPort === undefined ? false as const : { host: e.METRICS_HOST, port: metricsPort },
    logLevel: e.LOG_LEVEL as string,
    /** json (production) or pretty (for people at a terminal: `npm run dev`; needs the dev dependency pino-pretty). */
    logFormat: e.LOG_FORMAT,
    /** Origins whose pages may call the API from a browser (CORS); empty = off, ['*'] = any. */
    corsOrigins: e.CORS_ORIGINS.split(',').map(o => o.trim()).filter(o => o !== ''),
    /** Admin keys from API_KEYS (the bootstrap; more keys live in the state store: services/keys.ts). */
    apiKeys,
    /**
     * Where the admin key is kept when API_KEYS is unset: generated on the first start, mode 0600,
     * read on every later one (plugins/auth.ts), so restarts keep it; undefined when API_KEYS is set.
     */
    adminKeyFile: apiKeys.length === 0 ? path.join(dataDir, 'admin-key') : undefined,
    dataDir,
    storage,
    state,
    limits: {
      /** Bytes. */
      maxFileSize: e.MAX_FILE_SIZE,
      /** Upper bound accepted for max_downloads. */
      maxDownloads: e.MAX_DOWNLOADS,
      /** Upper bound accepted for expiry_hours. */
      maxExpiryHours: e.MAX_EXPIRY_HOURS,
      /** Upper bound accepted for total_chunks (S3 allows 10,000 parts). */
      maxTotalChunks: e.MAX_TOTAL_CHUNKS,
      /** Bytes. */
      maxChunkSize: e.MAX_CHUNK_SIZE
    },
    /** ms a chunked session lives without activity. */
    sessionTtlMs: e.SESSION_TTL_SECONDS * 1000,
    /** Chunked sessions one API key may hold open at once (429 DROPCODE_TOO_MANY_SESSIONS beyond). */
    maxOpenSessionsPerKey: e.MAX_OPEN_SESSIONS_PER_KEY,
    rateLimits: {
      /** ms of one counting window. */
      windowMs: e.RATE_LIMIT_WINDOW_SECONDS * 1000,
      /** Failed code lookups (download/delete 404s) allowed per client address per window; 0 = no limit. */
      failedLookups: e.RATE_LIMIT_FAILED_LOOKUPS,
      /** Upload-endpoint requests allowed per API key per window; 0 = no limit. */
      uploads: e.RATE_LIMIT_UPLOADS
    },
    sweeper: {
      /** ms between sweeps; 0 disables the timer (sweeps can still be run by hand). */
      intervalMs: e.SWEEP_INTERVAL_SECONDS * 1000,
      /** ms an object outlives its record's expiry, so a download started just before expiry can finish. */
      graceMs: e.SWEEP_GRACE_SECONDS * 1000
    },
    /** ms after which an unfinished upload's object is considered abandoned and swept. */
    uploadTimeoutMs: e.UPLOAD_TIMEOUT_SECONDS * 1000,
    /** ms a cut download stays resumable with its claim's ETag (its object is kept meanwhile). */
    downloadResumeMs: e.DOWNLOAD_RESUME_SECONDS * 1000,
    /** Per-instance limits beyond which requests are refused with 503 DROPCODE_BUSY (0 = no limit). */
    overload: {
      maxUploads: e.MAX_CONCURRENT_UPLOADS,
      maxDownloads: e.MAX_CONCURRENT_DOWNLOADS,
      /** ms of event-loop delay beyond which new requests are shed. */
      eventLoopDelayMs: e.SHED_EVENT_LOOP_DELAY_MS,
      /** Percent of the V8 heap limit beyond which new requests are shed. */
      heapUsedPercent: e.SHED_HEAP_USED_PERCENT
    },
    /**
     * Least traffic of a running transfer whose client owes bytes (body still coming, or a
     * response not taken): fewer than `bytes` in a window of `windowMs` and the connection is cut
     * (plugins/stall-guard.ts). bytes 0: off.
     */
    minTransferRate: { bytes: e.MIN_TRANSFER_BYTES, windowMs: e.MIN_TRANSFER_WINDOW_SECONDS * 1000 },
    /** After answering before a request body was read: how much of it is read and discarded (lingering close), in ms and bytes at most. */
    linger: { maxMs: e.LINGER_SECONDS * 1000, maxBytes: e.LINGER_MAX_BYTES },
    /** ms a chunk upload's lock lasts without a heartbeat: a crashed holder's lock is gone after this. */
    chunkLockMs: e.CHUNK_LOCK_SECONDS * 1000,
    /** ms between SIGTERM and closing the listener, while /readyz answers 503 so balancers move away. */
    drainDelayMs: e.DRAIN_DELAY_SECONDS * 1000,
    /** ms in-flight requests get to finish after the listener closed before their connections are cut. */
    shutdownGraceMs: e.SHUTDOWN_GRACE_SECONDS * 1000
  }
}

/** The configuration: what loadConfig returns, each field documented there. */
export type Config = ReturnType<typeof loadConfig>
