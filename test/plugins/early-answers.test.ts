/**
 * Answers given before the request body was read, as real clients meet them: Node's fetch
 * (undici) reported `fetch failed` (EPIPE) instead of the answer when the server closed while
 * it was still sending; curl was invited by an automatic `100 Continue` to send a body that was
 * refused anyway. Also the documented timeouts: headers, and the stall guard.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { API_KEY, startApp, testConfig } from '../helpers/app.js'
import { startSession } from '../helpers/chunks.js'
import { startServer, stopServer } from '../helpers/server-process.js'
import { dataDir } from '../helpers/tmp.js'

const curl = promisify(execFile)
const MiB = 1024 * 1024

function manyFields (n: number): FormData {
  const fd = new FormData()
  for (let i = 0; i < n; i++) fd.append(`field${i}`, 'x')
  fd.append('file', new Blob(['data']), 'f.bin')
  return fd
}

t.test('200 early answers through Node\'s fetch: every one arrives, no connection error (early_answer_epipe)', async t => {
  // A real server process: in one process the client and the server share an event loop and
  // the race that broke clients (the server closing while the client still sends) never happens.
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: API_KEY, MAX_FILE_SIZE: String(1 * MiB), MAX_CHUNK_SIZE: String(1 * MiB) })
  const { url } = server
  const id = await startSession(url, [['filename', 'x'], ['total_chunks', '2']])
  const twoMiB = new Uint8Array(2 * MiB)
  const badChunk = () => {
    const fd = new FormData()
    fd.append('upload_id', id)
    fd.append('chunk_index', '7')
    fd.append('chunk', new Blob([new Uint8Array(512 * 1024)]), 'c')
    return fd
  }
  const overLimit = () => { const fd = new FormData(); fd.append('file', new Blob([twoMiB]), 'big.bin'); return fd }
  const cases = [
    { name: '3000 fields', expect: [400, 'DROPCODE_TOO_MANY_PARTS'], send: () => fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: manyFields(3000) }) },
    { name: 'chunk_index out of range, then the chunk', expect: [400, 'DROPCODE_INVALID_FIELD'], send: () => fetch(`${url}/upload/chunk`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: badChunk() }) },
    { name: 'a file over MAX_FILE_SIZE', expect: [413, 'DROPCODE_FILE_TOO_LARGE'], send: () => fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: overLimit() }) },
    { name: 'a wrong key on a 2 MiB body', expect: [401, 'DROPCODE_UNAUTHORIZED'], send: () => fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': 'wrong' }, body: overLimit() }) }
  ]
  const outcomes = new Map<string, number>()
  for (let i = 0; i < 200; i++) {
    const c = cases[i % cases.length]!
    let outcome: string
    try {
      const res = await c.send()
      const body = await res.json() as { code?: string, error?: string }
      outcome = res.status === c.expect[0] && body.code === c.expect[1] && typeof body.error === 'string' ? 'answered' : `wrong answer ${res.status} ${String(body.code)}`
    } catch (err) {
      outcome = `${c.name}: ${String((err as { cause?: unknown }).cause ?? err)}`
    }
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
  }
  t.same(Object.fromEntries(outcomes), { answered: 200 }, 'the documented JSON answer, every time')
  t.equal(await stopServer(server), 0)
})

t.test('a streamed body (no Content-Length) over the limit: 413 reaches fetch', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: API_KEY, MAX_FILE_SIZE: String(1 * MiB) })
  const { url } = server
  const boundary = 'b0undary'
  async function * body () {
    yield Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="x"\r\n\r\n`)
    for (let i = 0; i < 64; i++) yield Buffer.alloc(256 * 1024)
    yield Buffer.from(`\r\n--${boundary}--\r\n`)
  }
  const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': `multipart/form-data; boundary=${boundary}` }, body: ReadableStream.from(body()), duplex: 'half' } as RequestInit)
  t.equal(res.status, 413)
  t.match(await res.json(), { code: 'DROPCODE_FILE_TOO_LARGE' })
  t.equal(await stopServer(server), 0)
})

t.test('above LINGER_MAX_BYTES curl still sees the 413, and the connection is closed at the bound', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_FILE_SIZE: String(1 * MiB), LINGER_MAX_BYTES: String(2 * MiB), LINGER_SECONDS: '5' }))
  const file = path.join(dataDir(t), 'thirty.bin')
  fs.writeFileSync(file, Buffer.alloc(30 * MiB))
  const started = Date.now()
  // -H 'Expect:' keeps curl from waiting for 100 Continue: it sends the body at once.
  const { stdout } = await curl('curl', ['-s', '-o', '-', '-w', '\\n%{http_code}', '-H', `X-Client-Key: ${API_KEY}`, '-H', 'Expect:', '-F', `file=@${file}`, `${url}/upload`]).catch((err: { stdout: string }) => err)
  const [body, status] = [stdout.slice(0, stdout.lastIndexOf('\n')), stdout.slice(stdout.lastIndexOf('\n') + 1)]
  t.equal(status, '413')
  t.match(JSON.parse(body), { code: 'DROPCODE_FILE_TOO_LARGE' })
  t.ok(Date.now() - started < 5000, 'not held longer than the bound')
})

t.test('Expect: 100-continue is answered after the key and size checks (curl)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_FILE_SIZE: String(4 * MiB) }))
  const dir = dataDir(t)
  const big = path.join(dir, 'two.bin')
  fs.writeFileSync(big, Buffer.alloc(2 * MiB, 1))
  const huge = path.join(dir, 'eight.bin')
  fs.writeFileSync(huge, Buffer.alloc(8 * MiB, 1))
  const run = async (key: string, file: string) => {
    const { stdout, stderr } = await curl('curl', ['-sv', '-o', '/dev/null', '-w', '%{http_code} %{size_upload}', '-H', `X-Client-Key: ${key}`, '-H', 'Expect: 100-continue', '-F', `file=@${file}`, `${url}/upload`])
    const [status, uploaded] = stdout.split(' ')
    return { status, uploaded: Number(uploaded), continued: /< HTTP\/1.1 100 Continue/.test(stderr) }
  }
  t.same(await run('wrong', big), { status: '401', uploaded: 0, continued: false }, 'a wrong key: 401 at once, no body sent')
  t.same(await run(API_KEY, huge), { status: '413', uploaded: 0, continued: false }, 'a declared size over the limit: 413 at once, no body sent')
  const ok = await run(API_KEY, big)
  t.equal(ok.status, '200')
  t.ok(ok.continued, '100 Continue for a request that will be read')
  t.ok(ok.uploaded > 2 * MiB)
})

t.test('request headers trickling in are cut at the headers timeout, to the second', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}), { headersTimeoutMs: 2000 })
  const { port } = new URL(url)
  const sockets = Array.from({ length: 20 }, () => net.connect(Number(port), '127.0.0.1'))
  const started = Date.now()
  const answers: string[] = sockets.map(() => '')
  sockets.forEach((s, i) => s.on('data', (d: Buffer) => { answers[i] += d.toString() }))
  const closedAfter = await Promise.all(sockets.map(s => new Promise<number>(resolve => {
    s.on('connect', () => s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'))
    const drip = setInterval(() => { if (!s.destroyed) s.write('X-Drip: 1\r\n') }, 300)
    s.on('error', () => {})
    s.on('close', () => { clearInterval(drip); resolve(Date.now() - started) })
  })))
  const latest = Math.max(...closedAfter)
  t.ok(answers.every(a => a.startsWith('HTTP/1.1 408 ')), 'each is told why: 408')
  t.ok(Math.min(...closedAfter) >= 1900 && latest < 3500, `closed after ${Math.min(...closedAfter)}–${latest} ms (timeout 2000 ms)`)
})

t.test('a stalled request is cut at the stall bound, to the second', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}), { stallMs: 3000 })
  const { port } = new URL(url)
  const s = net.connect(Number(port), '127.0.0.1')
  const started = Date.now()
  s.on('connect', () => s.write(`POST /upload HTTP/1.1\r\nHost: x\r\nX-Client-Key: ${API_KEY}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\ncontent-disposition: form-data; name="file"; filename="f"\r\n\r\nabc`))
  s.on('error', () => {})
  s.resume()
  const took = await new Promise<number>(resolve => s.on('close', () => resolve(Date.now() - started)))
  t.ok(took >= 2900 && took < 4500, `cut after ${took} ms (stall bound 3000 ms)`)
})
