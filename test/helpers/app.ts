/**
 * Builds apps for tests: one config per test (fresh data dir, Redis prefix and bucket), a real
 * listening server on 127.0.0.1:0 with its metrics listener (as server.ts starts them), and
 * teardown that closes both.
 */
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { buildApp, type AppOverrides } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { startMetricsListener } from '../../src/server/metrics-listener.js'
import type { TestRedis } from './redis-server.js'
import type { TestS3 } from './s3.js'
import { dataDir } from './tmp.js'

export const API_KEY = 'test-key-0123456789'

export type DriverPair = 'fs+local' | 's3+redis'

export interface Backends {
  redis?: TestRedis
  /** A Redis Cluster or a Sentinel setup, used instead of `redis` when given. */
  redisSetup?: { env (): Record<string, string> }
  s3?: TestS3
}

export { dataDir } from './tmp.js'

/** Environment selecting a driver pair with fresh namespaces, plus `extra`. */
export function testEnv (t: Test, pair: DriverPair, backends: Backends, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {
    API_KEYS: API_KEY,
    DATA_DIR: dataDir(t),
    LOG_LEVEL: 'silent',
    SWEEP_INTERVAL_SECONDS: '0',
    // In-process tests share the server's event loop with their own data generation; load
    // shedding would answer 503 to the test's lag (test/plugins/overload.test.ts turns it on).
    SHED_EVENT_LOOP_DELAY_MS: '0',
    // Every test client is 127.0.0.1, and many tests look up missing codes on purpose: the
    // guessing limit (on by default) would answer them 429. test/plugins/rate-limit.test.ts tests it.
    RATE_LIMIT_FAILED_LOOKUPS: '0'
  }
  if (pair === 's3+redis') {
    if ((backends.redis ?? backends.redisSetup) === undefined || backends.s3 === undefined) throw new Error('s3+redis needs a test Redis and S3')
    Object.assign(env, backends.s3.env(), backends.redisSetup !== undefined
      ? backends.redisSetup.env()
      : {
          STATE_DRIVER: 'redis',
          REDIS_URL: backends.redis!.url
        }, { REDIS_PREFIX: `t${randomBytes(4).toString('hex')}:` })
  }
  return { ...env, ...extra }
}

export function testConfig (t: Test, pair: DriverPair, backends: Backends, extra: Record<string, string> = {}): Config {
  return loadConfig(testEnv(t, pair, backends, extra))
}

export interface RunningApp {
  app: FastifyInstance
  url: string
  /** GET here for the Prometheus metrics (their own listener, never the service port). */
  metricsUrl: string
  config: Config
}

/** Builds the app, listens on free ports (service and metrics), and closes both at the end of the test. */
export async function startApp (t: Test, config: Config, overrides: AppOverrides = {}): Promise<RunningApp> {
  const app = await buildApp(config, overrides)
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  const metrics = await startMetricsListener(app.metrics.registry, { host: '127.0.0.1', port: 0 }, app.log)
  t.teardown(() => metrics.close())
  return { app, url: `http://127.0.0.1:${port}`, metricsUrl: `http://127.0.0.1:${metrics.address.port}/metrics`, config }
}

/** A multipart body for fetch, fields in the order given. */
export function form (entries: Array<[string, string | { data: Uint8Array | string, filename?: string }]>): FormData {
  const fd = new FormData()
  for (const [name, value] of entries) {
    if (typeof value === 'string') fd.append(name, value)
    else fd.append(name, new Blob([value.data]), value.filename ?? 'file.bin')
  }
  return fd
}

/**
 * A JSON answer of the service as the tests read it: `code` is a success's download code or a
 * refusal's error code (api/answers.ts has each answer's exact shape), the rest as sent.
 */
export type Answer = { code: string, error?: string, size?: number, sha256?: string, upload_id?: string } & Record<string, unknown>

export async function upload (url: string, entries: Parameters<typeof form>[0], key = API_KEY) {
  const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': key }, body: form(entries) })
  return { status: res.status, headers: res.headers, body: await res.json() as Answer }
}

/** The codes of `codes` that `url` does not find (HEAD /download/{code} is not 200; nothing is counted). */
export async function missingCodes (url: string, codes: string[]): Promise<string[]> {
  const missing: string[] = []
  for (const code of codes) {
    if ((await fetch(`${url}/download/${code}`, { method: 'HEAD' })).status !== 200) missing.push(code)
  }
  return missing
}

/**
 * `clients` clients uploading small files to `url` as fast as they can, until `stop()` or until
 * the server goes away (a client whose connection fails stops). `codes` collects every code
 * answered 200, in the order the answers came.
 */
export function uploadTraffic (url: string, { key = API_KEY, clients = 8 }: { key?: string, clients?: number } = {}) {
  const codes: string[] = []
  const stopped = new AbortController()
  const running = Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; !stopped.signal.aborted; i++) {
      let up: Awaited<ReturnType<typeof upload>>
      try {
        up = await upload(url, [['file', { data: `client ${c} file ${i}`, filename: 'f.bin' }]], key)
      } catch { return } // the connection died with the server
      if (up.status === 200) codes.push(up.body.code)
    }
  }))
  return { codes, stop: async () => { stopped.abort(); await running } }
}

/**
 * A raw multipart body, byte for byte as given (fetch's FormData would percent-encode `"` and
 * newlines in filenames, hiding what a hand-written client may send).
 */
export function rawMultipart (parts: Array<{ name: string, filename?: string, disposition?: string, data: string | Uint8Array }>, boundary = 'dropcode-test-boundary') {
  const chunks: Buffer[] = []
  for (const p of parts) {
    const disposition = p.disposition ?? `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`
    chunks.push(Buffer.from(`--${boundary}\r\ncontent-disposition: ${disposition}\r\n${p.filename !== undefined ? 'content-type: application/octet-stream\r\n' : ''}\r\n`))
    chunks.push(Buffer.from(p.data))
    chunks.push(Buffer.from('\r\n'))
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` }
}

/** Rejects when `promise` has not settled within `ms`. */
export async function within<T> (promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms)
  })
  try {
    return await Promise.race([promise, deadline])
  } finally {
    clearTimeout(timer)
  }
}

/** Polls `check` until it stops throwing or `ms` pass (for effects that follow a response). */
export async function eventually (check: () => Promise<void>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (true) {
    try {
      return await check()
    } catch (err) {
      if (Date.now() > deadline) throw err
      await new Promise(resolve => setTimeout(resolve, 25))
    }
  }
}
