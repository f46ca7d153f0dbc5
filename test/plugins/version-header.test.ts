/**
 * `Dropcode-Version` on every answer, over real HTTP: routes, the not-found and error handlers,
 * router errors, early 401/413 answers to `Expect: 100-continue`, 503s (overload, draining),
 * static assets, downloads (200, 206, 404, 416, HEAD), the metrics listener, and the bytes
 * written straight to the socket for a request Node's parser rejects. The CLI tells a proxy's
 * answer from the service's by it (test/cli/proxy-answers.test.ts).
 *
 * Also `X-Accel-Buffering: no` on downloads: stock nginx read a whole download ahead of the
 * client, so the service counted it whole and deleted a one-time file while the client had a
 * quarter of it.
 */
import http from 'node:http'
import net from 'node:net'
import fs from 'node:fs'
import t from 'tap'
import { VERSION, VERSION_HEADER } from '../../src/core/version.js'
import { WEB_ROOT } from '../../src/routes/web.js'
import { API_KEY, startApp, testConfig, upload, within } from '../helpers/app.js'
import { bytes } from '../helpers/streams.js'

const MiB = 1024 * 1024
const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

/** Sends `request` on a fresh connection; resolves with everything the server wrote until it closed. */
function rawExchange (url: string, request: string): Promise<string> {
  const { port } = new URL(url)
  return within(new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request))
    let answer = ''
    socket.setEncoding('latin1')
    socket.on('data', (c: string) => { answer += c })
    socket.on('close', () => resolve(answer))
    socket.on('error', reject)
  }), 10_000, 'a raw answer')
}

/** The status line and the headers (lower-case names) of a raw answer. */
function parseHead (answer: string) {
  const [head = ''] = answer.split('\r\n\r\n')
  const [status = '', ...lines] = head.split('\r\n')
  return { status, headers: Object.fromEntries(lines.map(l => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()])) as Record<string, string> }
}

t.test('the version is package.json\'s', async t => {
  t.equal(VERSION, pkg.version)
  t.match(VERSION, /^\d+\.\d+\.\d+/)
})

t.test('every answer carries Dropcode-Version: routes, errors, router errors, static assets, downloads, metrics', async t => {
  const { url, metricsUrl } = await startApp(t, testConfig(t, 'fs+local', {}))
  const asset = fs.readdirSync(`${WEB_ROOT}assets`).find(f => f.endsWith('.js'))
  t.ok(asset !== undefined, 'the web page is built (npm run build)')
  const code = (await upload(url, [['file', { data: 'hello' }], ['max_downloads', '2']])).body.code
  const keyed = { 'x-client-key': API_KEY }
  const cases: Array<[string, number, string, RequestInit?]> = [
    ['/healthz', 200, 'liveness'],
    ['/readyz', 200, 'readiness'],
    ['/limits', 200, 'limits'],
    ['/openapi.json', 200, 'OpenAPI'],
    ['/', 200, 'the web page'],
    [`/assets/${asset!}`, 200, 'a static asset'],
    ['/assets/no-such-file.js', 404, 'a missing asset'],
    ['/no-such-route', 404, 'an unknown route'],
    ['/metrics', 404, '/metrics on the service port'],
    [`/download/${code}`, 200, 'HEAD of a download', { method: 'HEAD' }],
    ['/download/ZZZZZZ', 404, 'HEAD of an unknown code', { method: 'HEAD' }],
    ['/download/ZZZZZZ', 404, 'a download of an unknown code (HTML page)'],
    ['/download/%E0%A4%A', 404, 'an undecodable download path (router error)'],
    ['/upload/%E0%A4%A', 400, 'an undecodable path (router error)'],
    ['/upload', 401, 'an upload without a key', { method: 'POST', body: 'x' }],
    ['/upload', 400, 'an upload that is not multipart', { method: 'POST', headers: keyed, body: 'x' }],
    [`/download/${code}`, 200, 'a download'],
    [`/delete/${code}`, 200, 'a delete', { method: 'DELETE' }],
    [`/delete/${code}`, 404, 'a delete of a deleted code', { method: 'DELETE' }]
  ]
  for (const [path, status, what, init] of cases) {
    const res = await fetch(`${url}${path}`, init)
    await res.arrayBuffer()
    t.equal(res.status, status, `${what}: ${status}`)
    t.equal(res.headers.get(VERSION_HEADER), VERSION, `${what}: Dropcode-Version`)
  }
  const up = await upload(url, [['file', { data: 'x' }]])
  t.equal(up.status, 200)
  t.equal(up.headers.get(VERSION_HEADER), VERSION, 'an upload')
  for (const path of ['/metrics', '/elsewhere']) {
    const res = await fetch(path === '/metrics' ? metricsUrl : metricsUrl.replace('/metrics', path))
    await res.text()
    t.equal(res.headers.get(VERSION_HEADER), VERSION, `the metrics listener: ${res.status}`)
  }
})

t.test('with CORS_ORIGINS, scripts on those origins may read it', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { CORS_ORIGINS: 'https://tools.example' }))
  const res = await fetch(`${url}/limits`, { headers: { origin: 'https://tools.example' } })
  await res.json()
  t.equal(res.headers.get(VERSION_HEADER), VERSION)
  t.match(res.headers.get('access-control-expose-headers'), /(^|, ?)Dropcode-Version(,|$)/)
})

t.test('early answers to Expect: 100-continue (401, 413) and a malformed request carry it, over a raw socket', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_FILE_SIZE: String(MiB) }))
  const upload = (key: string, length: number) => `POST /upload HTTP/1.1\r\nHost: x\r\nX-Client-Key: ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`
  // The body is never sent: the answer must come before it, and the connection then close.
  const wrongKey = parseHead(await rawExchange(url, upload('wrong', 10 * MiB)))
  t.match(wrongKey.status, /^HTTP\/1\.1 401 /, 'a wrong key: 401 before the body, no 100 Continue')
  t.equal(wrongKey.headers[VERSION_HEADER], VERSION)
  const tooLarge = parseHead(await rawExchange(url, upload(API_KEY, 10 * MiB)))
  t.match(tooLarge.status, /^HTTP\/1\.1 413 /, 'a declared size over the limit: 413 before the body')
  t.equal(tooLarge.headers[VERSION_HEADER], VERSION)
  const malformed = await rawExchange(url, 'NOT AN HTTP REQUEST\r\n\r\n')
  const parsed = parseHead(malformed)
  t.match(parsed.status, /^HTTP\/1\.1 400 /, 'Node\'s parser refuses it (clientError)')
  t.equal(parsed.headers[VERSION_HEADER], VERSION)
  t.match(malformed, /"code":"DROPCODE_BAD_REQUEST"/)
  const huge = parseHead(await rawExchange(url, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`))
  t.match(huge.status, /^HTTP\/1\.1 431 /, 'oversized headers (clientError)')
  t.equal(huge.headers[VERSION_HEADER], VERSION)
})

t.test('503s carry it: no transfer slot free, and /readyz while draining', async t => {
  const { app, url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CONCURRENT_UPLOADS: '1' }))
  // One upload holds the only slot while its body trickles in.
  const held = http.request(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': 'multipart/form-data; boundary=b', 'transfer-encoding': 'chunked' } })
  const heldAnswer = new Promise<number>((resolve, reject) => held.on('response', res => { res.resume(); resolve(res.statusCode!) }).on('error', reject))
  held.write('--b\r\ncontent-disposition: form-data; name="file"; filename="slow"\r\n\r\nsome bytes')
  await new Promise(resolve => setTimeout(resolve, 200))
  const busy = await upload(url, [['file', { data: 'x' }]])
  t.equal(busy.status, 503)
  t.equal(busy.body.code, 'DROPCODE_BUSY')
  t.equal(busy.headers.get(VERSION_HEADER), VERSION, 'overload')
  held.end('\r\n--b--\r\n')
  t.equal(await heldAnswer, 200)

  const shutdown = app.lifecycle.shutdown({ drainMs: 300, graceMs: 1000 })
  const draining = await fetch(`${url}/readyz`)
  t.same([draining.status, await draining.json()], [503, { status: 'draining' }])
  t.equal(draining.headers.get(VERSION_HEADER), VERSION, 'draining')
  await shutdown
})

t.test('downloads tell proxies not to buffer them: X-Accel-Buffering: no on 200 and 206 (nginx read a one-time file ahead of the client, which was then deleted)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}))
  // Large enough that stopping after the headers leaves most of it unsent: a cut download.
  const data = bytes(8 * MiB, 3)
  const code = (await upload(url, [['file', { data }]])).body.code
  const abort = new AbortController()
  const first = await fetch(`${url}/download/${code}`, { signal: abort.signal })
  t.equal(first.status, 200)
  t.equal(first.headers.get('x-accel-buffering'), 'no', '200')
  t.equal(first.headers.get(VERSION_HEADER), VERSION)
  const etag = first.headers.get('etag')!
  const reader = first.body!.getReader()
  await reader.read()
  abort.abort()
  await reader.closed.catch(() => {})
  // The cut is seen by the service once the socket closes; until then the claim is not resumable.
  let past: Response | undefined
  for (let i = 0; i < 50 && past?.status !== 416; i++) {
    await past?.arrayBuffer()
    if (i > 0) await new Promise(resolve => setTimeout(resolve, 50))
    past = await fetch(`${url}/download/${code}`, { headers: { range: `bytes=${data.length}-`, 'if-range': etag } })
  }
  t.equal(past!.status, 416, 'a range past the end of the claim')
  t.equal(past!.headers.get(VERSION_HEADER), VERSION, '416')
  await past!.text()
  const resumed = await fetch(`${url}/download/${code}`, { headers: { range: `bytes=${MiB}-`, 'if-range': etag } })
  t.equal(resumed.status, 206)
  t.equal(resumed.headers.get('x-accel-buffering'), 'no', '206')
  t.equal(resumed.headers.get(VERSION_HEADER), VERSION)
  t.equal((await resumed.arrayBuffer()).byteLength, data.length - MiB)
})
