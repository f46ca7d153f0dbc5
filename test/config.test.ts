import t from 'tap'
import { ConfigError, EnvSchema, loadConfig } from '../src/config.js'

t.test('no settings: the embedded default (fs + local) under ./data, with a generated key', async t => {
  const c = loadConfig({})
  t.equal(c.storage.driver, 'fs')
  t.equal(c.state.driver, 'local')
  t.equal(c.port, 3000)
  t.equal(c.host, '0.0.0.0')
  t.equal(c.apiKeyGenerated, true)
  t.equal(c.apiKeys.length, 1)
  t.ok(c.apiKeys[0]!.length >= 32)
  t.not(loadConfig({}).apiKeys[0], c.apiKeys[0], 'a fresh key per start')
  t.same(c.limits, { maxFileSize: 5 * 1024 ** 3, maxDownloads: 1000, maxExpiryHours: 720, maxTotalChunks: 10_000, maxChunkSize: 100 * 1024 ** 2 })
  t.equal(c.sessionTtlMs, 86_400_000)
})

t.test('S3_BUCKET selects s3, REDIS_URL selects redis; explicit drivers win', async t => {
  const c = loadConfig({ S3_BUCKET: 'bucket-a', REDIS_URL: 'redis://h:6379', S3_ENDPOINT: 'http://127.0.0.1:9000' })
  t.match(c.storage, { driver: 's3', bucket: 'bucket-a', forcePathStyle: true, checksumMode: 'when_required', region: 'us-east-1', credentials: undefined })
  t.match(c.state, { driver: 'redis', url: 'redis://h:6379', prefix: 'dropcode:' })
  const forced = loadConfig({ S3_BUCKET: 'bucket-a', REDIS_URL: 'redis://h', STORAGE_DRIVER: 'fs', STATE_DRIVER: 'local' })
  t.equal(forced.storage.driver, 'fs')
  t.equal(forced.state.driver, 'local')
  t.equal(loadConfig({ S3_BUCKET: 'bucket-a' }).storage.driver === 's3' && (loadConfig({ S3_BUCKET: 'bucket-a' }).storage as { forcePathStyle: boolean }).forcePathStyle, false, 'AWS (no endpoint): virtual-hosted style')
})

t.test('API_KEYS: comma-separated, trimmed', async t => {
  const c = loadConfig({ API_KEYS: ' key-one , key-two ' })
  t.same(c.apiKeys, ['key-one', 'key-two'])
  t.equal(c.apiKeyGenerated, false)
})

t.test('a bad value stops start-up with a message naming the variable', async t => {
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^invalid PORT="abc"/],
    [{ PORT: '70000' }, /^invalid PORT="70000": must be an integer from 0 to 65535/],
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
