import path from 'node:path'
import t from 'tap'
import { ConfigError, EnvSchema, loadConfig } from '../src/config.js'

t.test('no settings: the embedded default (fs + local) under ./data, its admin key kept there', async t => {
  const c = loadConfig({})
  t.equal(c.storage.driver, 'fs')
  t.equal(c.state.driver, 'local')
  t.equal(c.port, 3000)
  t.equal(c.host, '0.0.0.0')
  t.same(c.apiKeys, [])
  t.equal(c.adminKeyFile, path.resolve('data', 'admin-key'))
  t.same(c.limits, { maxFileSize: 5 * 1024 ** 3, maxDownloads: 1000, maxExpiryHours: 720, maxTotalChunks: 10_000, maxChunkSize: 100 * 1024 ** 2 })
  t.equal(c.sessionTtlMs, 86_400_000)
  t.same(c.minTransferRate, { bytes: 32 * 1024, windowMs: 30_000 }, 'minimum transfer rate: 32 KiB per 30 s')
  t.same(loadConfig({ MIN_TRANSFER_BYTES: '0', MIN_TRANSFER_WINDOW_SECONDS: '5' }).minTransferRate, { bytes: 0, windowMs: 5000 })
  t.throws(() => loadConfig({ MIN_TRANSFER_WINDOW_SECONDS: '0' }), /^invalid MIN_TRANSFER_WINDOW_SECONDS="0"/)
})

t.test('S3_BUCKET selects s3, REDIS_URL selects redis; explicit drivers win', async t => {
  const c = loadConfig({ S3_BUCKET: 'bucket-a', REDIS_URL: 'redis://h:6379', S3_ENDPOINT: 'http://127.0.0.1:9000' })
  t.match(c.storage, { driver: 's3', bucket: 'bucket-a', forcePathStyle: true, checksumMode: 'when_required', region: 'us-east-1', credentials: undefined })
  t.match(c.state, { driver: 'redis', redis: { mode: 'single', url: 'redis://h:6379' }, prefix: 'dropcode:' })
  const forced = loadConfig({ S3_BUCKET: 'bucket-a', REDIS_URL: 'redis://h', STORAGE_DRIVER: 'fs', STATE_DRIVER: 'local' })
  t.equal(forced.storage.driver, 'fs')
  t.equal(forced.state.driver, 'local')
  t.equal(loadConfig({ S3_BUCKET: 'bucket-a' }).storage.driver === 's3' && (loadConfig({ S3_BUCKET: 'bucket-a' }).storage as { forcePathStyle: boolean }).forcePathStyle, false, 'AWS (no endpoint): virtual-hosted style')
})

t.test('API_KEYS: comma-separated, trimmed', async t => {
  const c = loadConfig({ API_KEYS: ' key-one , key-two ' })
  t.same(c.apiKeys, ['key-one', 'key-two'])
  t.equal(c.adminKeyFile, undefined, 'no key kept when API_KEYS is set')
})

t.test('a bad value stops start-up with a message naming the variable', async t => {
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^invalid PORT="abc"/],
    [{ PORT: '70000' }, /^invalid PORT="70000": must be a whole number \(digits only, no units\) from 0 to 65535/],
    [{ PORT: 'eighty' }, /^invalid PORT="eighty": must be a whole number \(digits only, no units\) from 0 to 65535$/],
    [{ MAX_FILE_SIZE: '5GB' }, /^invalid MAX_FILE_SIZE="5GB": must be a whole number .* from 1 to/],
    [{ MAX_FILE_SIZE: '1e9' }, /^invalid MAX_FILE_SIZE="1e9": must be a whole number \(digits only/],
    [{ PORT: '0x50' }, /^invalid PORT="0x50": must be a whole number \(digits only/],
    [{ PORT: ' 80' }, /^invalid PORT=" 80": must be a whole number \(digits only/],
    [{ MAX_FILE_SIZE: '99999999999999999999' }, /^invalid MAX_FILE_SIZE="99999999999999999999": must be a whole number .* from 1 to 9007199254740991$/],
    [{ API_KEYS: 'a key' }, /^invalid API_KEYS="a key": must be comma-separated keys .* such as API_KEYS=key-one,key-two$/],
    [{ REDIS_URL: 'localhost:6379' }, /^invalid REDIS_URL="localhost:6379": must be a Redis URL such as redis:\/\/localhost:6379/],
    [{ MAX_FILE_SIZE: '0' }, /^invalid MAX_FILE_SIZE/],
    [{ MAX_DOWNLOADS: '-5' }, /^invalid MAX_DOWNLOADS/],
    [{ MAX_EXPIRY_HOURS: '1.5' }, /^invalid MAX_EXPIRY_HOURS/],
    [{ LOG_LEVEL: 'loud' }, /^invalid LOG_LEVEL="loud": must be one of fatal, error/],
    [{ STORAGE_DRIVER: 'gcs' }, /^invalid STORAGE_DRIVER/],
    [{ STATE_DRIVER: 'memcached' }, /^invalid STATE_DRIVER/],
    [{ STORAGE_DRIVER: 's3' }, /^invalid S3_BUCKET="": required/],
    [{ STATE_DRIVER: 'redis' }, /^invalid REDIS_URL="": required/],
    [{ S3_BUCKET: 'Not_A_Bucket' }, /^invalid S3_BUCKET/],
    [{ S3_BUCKET: 'bkt', S3_ACCESS_KEY_ID: 'only-one' }, /S3_ACCESS_KEY_ID\/S3_SECRET_ACCESS_KEY: set both/],
    [{ S3_CHECKSUM_MODE: 'always' }, /^invalid S3_CHECKSUM_MODE/],
    [{ S3_PART_SIZE: '1048576' }, /^invalid S3_PART_SIZE/],
    [{ REDIS_URL: 'http://x' }, /^invalid REDIS_URL/],
    [{ API_KEYS: 'has space' }, /^invalid API_KEYS/],
    [{ S3_FORCE_PATH_STYLE: 'yes' }, /^invalid S3_FORCE_PATH_STYLE/],
    [{ MAX_TOTAL_CHUNKS: '10001' }, /^invalid MAX_TOTAL_CHUNKS/],
    [{ SESSION_TTL_SECONDS: '0' }, /^invalid SESSION_TTL_SECONDS/]
  ]
  for (const [env, message] of bad) {
    t.throws(() => loadConfig(env), message, JSON.stringify(env))
    t.throws(() => loadConfig(env), ConfigError)
  }
})

t.test('empty strings count as unset', async t => {
  t.equal(loadConfig({ PORT: '', S3_BUCKET: '' }).port, 3000)
})

t.test('every variable has a documented default or is optional', async t => {
  for (const [name, schema] of Object.entries(EnvSchema.properties)) {
    t.ok('default' in schema || !(EnvSchema.required as string[] | undefined)?.includes(name), name)
  }
})

t.test('REDIS_CLUSTER_NODES selects a Redis Cluster; REDIS_SENTINELS the master Sentinels name', async t => {
  const c = loadConfig({ REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, redis-b.internal:7001,[::1]:7002 ', REDIS_PASSWORD: 'pw' })
  t.same(c.state, { driver: 'redis', prefix: 'dropcode:', redis: { mode: 'cluster', password: 'pw', nodes: [{ host: '10.0.0.1', port: 7000 }, { host: 'redis-b.internal', port: 7001 }, { host: '::1', port: 7002 }] } })
  const s = loadConfig({ REDIS_SENTINELS: 's1:26379,s2:26379' })
  t.same(s.state, { driver: 'redis', prefix: 'dropcode:', redis: { mode: 'sentinel', name: 'mymaster', password: undefined, sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }] } })
  t.match(loadConfig({ REDIS_URL: 'redis://h:6379' }).state, { redis: { mode: 'single', url: 'redis://h:6379' } })
})

t.test('one way to reach Redis: REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS exclude each other', async t => {
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ REDIS_URL: 'redis://h:6379', REDIS_CLUSTER_NODES: 'h:7000' }, /^invalid REDIS_URL \+ REDIS_CLUSTER_NODES: set only one of REDIS_URL \(one Redis\), REDIS_CLUSTER_NODES \(a Redis Cluster\) or REDIS_SENTINELS/],
    [{ REDIS_CLUSTER_NODES: 'h:7000', REDIS_SENTINELS: 'h:26379' }, /^invalid REDIS_CLUSTER_NODES \+ REDIS_SENTINELS: set only one/],
    [{ REDIS_URL: 'redis://h:6379', REDIS_PASSWORD: 'pw' }, /^invalid REDIS_PASSWORD: with REDIS_URL, put the password in the URL/],
    [{ REDIS_CLUSTER_NODES: 'h' }, /^invalid REDIS_CLUSTER_NODES="h": must be comma-separated host:port/],
    [{ REDIS_CLUSTER_NODES: 'redis://h:7000' }, /^invalid REDIS_CLUSTER_NODES/],
    [{ REDIS_CLUSTER_NODES: 'h:7000,' }, /^invalid REDIS_CLUSTER_NODES/],
    [{ REDIS_CLUSTER_NODES: 'h:70000' }, /^invalid REDIS_CLUSTER_NODES="h:70000": port 70000 of h is not from 1 to 65535/],
    [{ REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'my master' }, /^invalid REDIS_SENTINEL_NAME/],
    [{ STATE_DRIVER: 'redis' }, /^invalid REDIS_URL="": required when STATE_DRIVER=redis \(or REDIS_CLUSTER_NODES for a Redis Cluster, REDIS_SENTINELS for Sentinel\)/]
  ]
  for (const [env, message] of bad) t.throws(() => loadConfig(env), message, JSON.stringify(env))
})

t.test('metrics have their own listener: 127.0.0.1:9464 by default, METRICS_PORT=0 for any free port, off for none', async t => {
  t.same(loadConfig({}).metrics, { host: '127.0.0.1', port: 9464 }, 'loopback: the service may listen everywhere, its metrics do not')
  t.same(loadConfig({ METRICS_HOST: '0.0.0.0', METRICS_PORT: '0' }).metrics, { host: '0.0.0.0', port: 0 })
  t.equal(loadConfig({ METRICS_PORT: 'off' }).metrics, false)
  for (const [env, message] of [
    [{ METRICS_PORT: '70000' }, /^invalid METRICS_PORT="70000": must be a port from 0 to 65535, or off$/],
    [{ METRICS_PORT: 'no' }, /^invalid METRICS_PORT="no": must be a port from 0 to 65535, or off$/],
    [{ METRICS_PORT: '3000' }, /^invalid METRICS_PORT="3000": must differ from PORT/],
    [{ PORT: '8080', METRICS_PORT: '8080' }, /^invalid METRICS_PORT="8080": must differ from PORT/]
  ] as const) t.throws(() => loadConfig(env), message, JSON.stringify(env))
  t.same(loadConfig({ PORT: '0', METRICS_PORT: '0' }).metrics, { host: '127.0.0.1', port: 0 }, 'both on free ports (tests)')
})
