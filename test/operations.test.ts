/**
 * What operators rely on: health and readiness, metrics, one log line per request without
 * secrets, request ids and TRUST_PROXY, and the OpenAPI document.
 */
import { Writable } from 'node:stream'
import pino from 'pino'
import t, { type Test } from 'tap'
import { API_KEY, eventually, startApp, testConfig, upload } from './helpers/app.js'
import { post, sendChunk, startSession } from './helpers/chunks.js'
import { startRedis } from './helpers/redis-server.js'
import { startS3 } from './helpers/s3.js'
import { listStored } from './helpers/storage.js'
import { bytes } from './helpers/streams.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** A logger whose lines the test can read. */
function capturedLogger () {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(JSON.parse(chunk.toString())); done() } })
  return { lines, logger: pino({ level: 'info' }, stream) }
}

/** A value from the metrics listener (`metricsUrl`), 0 when the series is absent. */
async function metricValue (metricsUrl: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(metricsUrl)).text()
  const line = text.split('\n').find(l => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)))
  return line === undefined ? 0 : Number(line.split(' ').pop())
}

t.test('healthz is always 200; readyz names the failing dependency and recovers', async t => {
  const { url } = await startApp(t, testConfig(t, 's3+redis', { redis, s3 }))
  t.same(await (await fetch(`${url}/healthz`)).json(), { status: 'ok' })
  const ready = await fetch(`${url}/readyz`)
  t.equal(ready.status, 200)
  t.same(await ready.json(), { status: 'ok', checks: { state: 'ok', storage: 'ok' } })
  await redis.stop()
  t.teardown(() => redis.start())
  const down = await fetch(`${url}/readyz`)
  t.equal(down.status, 503)
  t.same(await down.json(), { status: 'unavailable', checks: { state: 'failing', storage: 'ok' } })
  t.equal((await fetch(`${url}/healthz`)).status, 200, 'liveness does not depend on Redis')
  await redis.start()
  await eventually(async () => {
    const status = (await fetch(`${url}/readyz`)).status
    if (status !== 200) throw new Error(`readyz ${status}`)
  }, 10_000)
  t.pass('ready again')
})

t.test('readyz answers 503 as soon as draining starts; other routes keep serving', async t => {
  const { app, url } = await startApp(t, testConfig(t, 'fs+local', {}))
  t.equal((await fetch(`${url}/readyz`)).status, 200)
  const shutdown = app.lifecycle.shutdown({ drainMs: 300, graceMs: 1000 }) // what server.ts does on SIGTERM
  const res = await fetch(`${url}/readyz`)
  t.equal(res.status, 503)
  t.same(await res.json(), { status: 'draining' })
  t.equal((await upload(url, [['file', { data: 'x' }]])).status, 200, 'other routes keep serving while draining')
  await shutdown
})

t.test('metrics count uploads, downloads by outcome, refusals by reason, sessions and sweeps', async t => {
  const { url, metricsUrl, app } = await startApp(t, testConfig(t, 'fs+local', {}))
  const up = await upload(url, [['file', { data: bytes(1000) }]])
  await (await fetch(`${url}/download/${up.body.code}`)).arrayBuffer()
  await fetch(`${url}/download/${up.body.code}`) // exhausted
  await fetch(`${url}/download/ZZZZZZ`) // unknown
  await fetch(`${url}/download/bad`, { method: 'HEAD' }) // malformed: unknown
  const id = await startSession(url, [['filename', 'c'], ['total_chunks', '1']])
  await sendChunk(url, id, 0, bytes(10))
  await post(url, '/upload/complete', [['upload_id', id]])
  await app.sweeper.sweepOnce()
  t.equal(await metricValue(metricsUrl, 'dropcode_uploads_total', '{kind="single"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_uploads_total', '{kind="chunked"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_upload_bytes_total'), 1010)
  t.equal(await metricValue(metricsUrl, 'dropcode_downloads_total', '{outcome="served"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_download_bytes_total'), 1000)
  t.equal(await metricValue(metricsUrl, 'dropcode_download_refusals_total', '{reason="exhausted"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_download_refusals_total', '{reason="unknown"}'), 2)
  t.equal(await metricValue(metricsUrl, 'dropcode_chunked_sessions_total', '{event="opened"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_chunked_sessions_total', '{event="completed"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_sweeper_runs_total'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_cleanup_due_objects'), 0)
  t.ok(await metricValue(metricsUrl, 'dropcode_http_request_duration_seconds_count', '{method="POST",route="/upload",status="200",end="complete"}') >= 1)
  t.ok(await metricValue(metricsUrl, 'dropcode_process_resident_memory_bytes') > 0, 'process metrics')
})

t.test('an aborted download is counted once, as aborted, and is used up', async t => {
  const { url, metricsUrl } = await startApp(t, testConfig(t, 'fs+local', {}))
  const up = await upload(url, [['file', { data: bytes(8 * 1024 * 1024) }]])
  const controller = new AbortController()
  const res = await fetch(`${url}/download/${up.body.code}`, { signal: controller.signal })
  const reader = res.body!.getReader()
  await reader.read()
  controller.abort()
  await reader.closed.catch(() => {})
  await eventually(async () => {
    if (await metricValue(metricsUrl, 'dropcode_downloads_total', '{outcome="aborted"}') === 0) throw new Error('not counted yet')
  })
  t.equal(await metricValue(metricsUrl, 'dropcode_downloads_total', '{outcome="aborted"}'), 1)
  t.equal(await metricValue(metricsUrl, 'dropcode_downloads_total', '{outcome="served"}'), 0)
  t.equal((await fetch(`${url}/download/${up.body.code}`)).status, 404, 'a claimed download counts even when cut')
})

t.test('backend errors are counted', async t => {
  const { url, metricsUrl } = await startApp(t, testConfig(t, 's3+redis', { redis, s3 }))
  await redis.stop()
  t.teardown(() => redis.start())
  t.equal((await upload(url, [['file', { data: 'x' }]])).status, 503)
  t.equal(await metricValue(metricsUrl, 'dropcode_backend_errors_total', '{backend="state"}'), 1)
})

t.test('one log line per request: route, status, bytes, duration; no key, no full code', async t => {
  const { lines, logger } = capturedLogger()
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}), { loggerInstance: logger })
  const up = await upload(url, [['file', { data: 'abc' }]])
  const code = up.body.code
  await (await fetch(`${url}/download/${code}`)).text()
  // The line is written after the response is sent.
  await eventually(async () => { if (lines.filter(l => l.msg === 'request').length < 2) throw new Error('not logged yet') }).catch(() => {})
  const requests = lines.filter(l => l.msg === 'request')
  t.equal(requests.length, 2, 'one line per request')
  t.match(requests[1], { method: 'GET', route: '/download/:code', url: `/download/${code.slice(0, 2)}****`, status: 200, bytesOut: 3, ms: Number, reqId: String })
  const all = JSON.stringify(lines)
  t.notOk(all.includes(API_KEY), 'API key never logged')
  t.notOk(all.includes(code), 'code never logged in full')
})

async function requestIdAndIp (t: Test, env: Record<string, string>) {
  const { lines, logger } = capturedLogger()
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, env), { loggerInstance: logger })
  const res = await fetch(`${url}/healthz`, { headers: { 'x-request-id': 'lb-123', 'x-forwarded-for': '203.0.113.9' } })
  await eventually(async () => { if (!lines.some(l => l.msg === 'request')) throw new Error('not logged yet') })
  const line = lines.find(l => l.msg === 'request')!
  return { id: res.headers.get('x-request-id'), ip: line.ip }
}

t.test('TRUST_PROXY unset: X-Forwarded-For and X-Request-Id from clients are ignored', async t => {
  const { id, ip } = await requestIdAndIp(t, {})
  t.not(id, 'lb-123')
  t.match(id, /^[0-9a-f-]{36}$/)
  t.equal(ip, '127.0.0.1')
})

t.test('TRUST_PROXY naming the proxy: its X-Forwarded-For and X-Request-Id are used', async t => {
  const { id, ip } = await requestIdAndIp(t, { TRUST_PROXY: '127.0.0.1/8' })
  t.equal(id, 'lb-123')
  t.equal(ip, '203.0.113.9')
  const other = await requestIdAndIp(t, { TRUST_PROXY: '10.0.0.0/8' })
  t.not(other.id, 'lb-123', 'a peer outside the list is not trusted')
  t.equal(other.ip, '127.0.0.1')
})

t.test('OpenAPI: every route, its statuses and error body are documented', async t => {
  const { url, app } = await startApp(t, testConfig(t, 'fs+local', {}))
  const doc = await (await fetch(`${url}/openapi.json`)).json() as {
    openapi: string
    paths: Record<string, Record<string, { responses: Record<string, unknown>, security?: unknown, requestBody?: { content: Record<string, unknown> } }>>
  }
  t.match(doc.openapi, /^3\./)
  const routes = app.routeTable.filter(r => !r.hidden)
  t.ok(routes.length >= 10)
  for (const r of routes) {
    const path = r.url.replace(/:(\w+)/g, '{$1}')
    t.ok(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.url} is documented`)
  }
  for (const path of ['/upload', '/upload/start', '/upload/chunk', '/upload/verify', '/upload/complete']) {
    const op = doc.paths[path]!.post!
    t.ok(op.requestBody?.content['multipart/form-data'], `${path}: multipart body`)
    t.ok(op.security, `${path}: needs the API key`)
    for (const status of ['200', '400', '401']) t.ok(op.responses[status], `${path}: ${status}`)
  }
  t.ok(doc.paths['/download/{code}']!.get!.responses['404'])
  t.ok(doc.paths['/delete/{code}']!.delete!.responses['404'])
})

t.test('regression: close() ends a connection whose response finishes after closing began', async t => {
  const { app, url } = await startApp(t, testConfig(t, 'fs+local', {}))
  const up = await upload(url, [['file', { data: bytes(8 * 1024 * 1024) }], ['max_downloads', '2']])
  const res = await fetch(`${url}/download/${up.body.code}`)
  const reader = res.body!.getReader()
  await reader.read()
  const started = Date.now()
  const closing = app.close()
  while (!(await reader.read()).done) { /* drain the rest after close() began */ }
  await Promise.race([closing, new Promise((_resolve, reject) => setTimeout(() => reject(new Error('close() still waiting after 10 s')), 10_000))])
  t.ok(Date.now() - started < 10_000, `closed in ${Date.now() - started} ms (not keepAliveTimeout)`)
})

t.test('a request whose client stops sending is cut after the stall period; nothing is left', async t => {
  const running = await startApp(t, testConfig(t, 'fs+local', {}), { stallMs: 800 })
  const { default: http } = await import('node:http')
  const started = Date.now()
  const closed = await new Promise<number>(resolve => {
    const req = http.request(`${running.url}/upload`, {
      method: 'POST',
      headers: { 'x-client-key': API_KEY, 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(10 * 1024 * 1024) }
    })
    req.on('error', () => resolve(Date.now() - started))
    req.on('close', () => resolve(Date.now() - started))
    req.write('--x\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\n')
    req.write(bytes(256 * 1024)) // then silence
  })
  t.ok(closed >= 700 && closed < 5000, `connection cut after ${closed} ms`)
  await eventually(async () => {
    if (await running.app.state.cleanup.countDue(Number.MAX_SAFE_INTEGER) !== 0) throw new Error('not clean yet')
  })
  t.same(await listStored(running.config), [], 'the partial upload left nothing')
})
