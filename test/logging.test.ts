/**
 * Codes never reach a log (issue 19). Driven the way it was found: the real server process at
 * LOG_LEVEL=trace (every level it has), a full run of traffic over every route, success and
 * error paths, then the raw bytes it wrote to stdout are searched for every code, upload id and
 * claim id the answers handed out, and every secret the requests carried. On both driver pairs;
 * on S3 + Redis also with Redis refusing writes, so that the state errors (whose ioredis
 * details name the keys and arguments of the command) reach the log at error level.
 */
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { buildApp } from '../src/app.js'
import { maskUrl, serializeError } from '../src/logging.js'
import { testConfig, testEnv, upload, type Backends, type DriverPair } from './helpers/app.js'
import { post, sendChunk, startSession } from './helpers/chunks.js'
import { startRedis } from './helpers/redis-server.js'
import { startS3 } from './helpers/s3.js'
import { logged, startServer, stopServer } from './helpers/server-process.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** One raw request on its own connection, exactly as written (fetch would normalise the target); the whole answer. */
async function raw (url: string, requestLine: string): Promise<string> {
  const { port } = new URL(url)
  const socket = net.connect(Number(port), '127.0.0.1')
  let answer = ''
  socket.setEncoding('latin1')
  socket.on('data', (d: string) => { answer += d })
  socket.write(`${requestLine}\r\nHost: dropcode\r\nConnection: close\r\n\r\n`)
  await new Promise(resolve => socket.once('close', resolve))
  return answer
}

/** The claim id inside a GET answer's ETag ("c-<id>"). */
const claimOf = (res: Response) => /^"c-(.+)"$/.exec(res.headers.get('etag') ?? '')?.[1]

/**
 * Every route, success and error paths, as clients, confused users and guessers send them.
 * @returns every secret seen in an answer or sent in a request
 */
async function traffic (t: Test, url: string): Promise<Set<string>> {
  const secrets = new Set<string>()
  const keep = <T extends string | undefined>(s: T): T => { if (s !== undefined) secrets.add(s); return s }
  const get = (path: string, init: RequestInit = {}) => fetch(`${url}${path}`, init)
  const statuses: Record<string, number> = {}
  const note = async (what: string, res: Response | Promise<Response>) => { const r = await res; await r.arrayBuffer(); statuses[what] = r.status; return r }

  // Single upload, download, resume with If-Range, HEAD, the web page's share link.
  const up = await upload(url, [['file', { data: Buffer.alloc(16 * 1024 * 1024, 'logged? '), filename: 'a.txt' }], ['max_downloads', '5']])
  t.equal(up.status, 200, 'upload')
  const code = keep(up.body.code)
  // A download cut after its first bytes leaves its claim resumable.
  const first = await get(`/download/${code}`)
  statuses.download = first.status
  const claim = keep(claimOf(first))
  t.ok(claim, 'a GET answers a claim ETag')
  const reader = first.body!.getReader()
  await reader.read()
  await reader.cancel()
  await sleep(300)
  await note('resume', get(`/download/${code}`, { headers: { range: 'bytes=10-', 'if-range': `"c-${claim}"` } }))
  await note('resume, foreign claim', get(`/download/${code}`, { headers: { range: 'bytes=10-', 'if-range': '"c-AAAAAAAAAAAAAAAAAAAAAA"' } }).then(r => { keep(claimOf(r)); return r }))
  await note('head', get(`/download/${code}`, { method: 'HEAD', headers: { 'if-range': `"c-${claim}"` } }))
  for (const path of [`/d/${code}`, `/d/${code}/`, `/d/${code}/extra`, `/d/${code}?x=${code}`, `/${code}`, `/?code=${code}`,
    `/assets/${code}`, `/download/${code}/x?upload_id=${code}`, `/delete/${code}/x`, `/download/${code.toLowerCase()}`,
    `/download/%${code}`, `/download/${code}%zz`, `/download//${code}`, `/download/${code}${'x'.repeat(300)}`,
    `/healthz?code=${code}&${code}`, `/download/${code};jsessionid=1`, `/Download/${code}`]) {
    await note(`GET ${path}`, get(path))
  }
  for (const line of [`GET /download/${code}#frag HTTP/1.1`, `GET http://dropcode/d/${code} HTTP/1.1`, `GET /d/${code} HTTP/1.0`, `HEAD /download/${code}?${code} HTTP/1.1`]) {
    statuses[line] = Number((await raw(url, line)).slice(9, 12))
  }
  await note('wrong method', get(`/delete/${code}`))

  // Chunked: start, chunks, verify, complete (twice: the same code), and the error paths.
  const id = keep(await startSession(url, [['filename', 'c.bin'], ['total_chunks', '2']]))
  t.equal((await sendChunk(url, id, 0, Buffer.from('first chunk '))).status, 200, 'chunk 0')
  t.equal((await post(url, '/upload/chunk', [['upload_id', id], ['chunk_index', '5']], Buffer.from('x'))).status, 400, 'chunk index out of range')
  t.equal((await post(url, '/upload/complete', [['upload_id', id]])).status, 400, 'complete with a chunk missing')
  t.equal((await post(url, '/upload/verify', [['upload_id', id]], undefined, 'wrong-key')).status, 401, 'wrong key')
  t.equal((await post(url, '/upload/chunk', [['upload_id', id], ['chunk_index', '1']], Buffer.from('x'), 'wrong-key')).status, 401, 'wrong key, chunk')
  t.equal((await sendChunk(url, id, 1, Buffer.from('second chunk'))).status, 200, 'chunk 1')
  t.equal((await post(url, '/upload/verify', [['upload_id', id]])).status, 200, 'verify')
  const done = await post(url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200, 'complete')
  const chunkedCode = keep(done.body.code)
  t.equal((await post(url, '/upload/complete', [['upload_id', id]])).body.code, chunkedCode, 'a repeated complete answers the same code')
  await note('chunked download', get(`/download/${chunkedCode}`).then(r => { keep(claimOf(r)); return r }))
  const open = keep(await startSession(url, [['filename', 'open.bin'], ['total_chunks', '3']])) // stays live
  t.equal((await sendChunk(url, open, 0, Buffer.from('open'))).status, 200)
  t.equal((await post(url, '/upload/verify', [['upload_id', open.slice(0, -1) + (open.endsWith('A') ? 'B' : 'A')]])).status, 404, 'unknown session')
  t.equal((await post(url, `/upload/verify?upload_id=${open}`, [['upload_id', open]])).status, 200, 'upload id in the query too')
  t.equal((await post(url, `/upload/${open}`, [['upload_id', open]])).status, 404, 'upload id in an unknown path')
  t.equal((await post(url, '/upload/start', [['filename', 'x'], ['total_chunks', 'x']])).status, 400, 'bad start')

  // Wrong key on a single upload, unknown codes, delete.
  t.equal((await upload(url, [['file', { data: 'x' }]], 'wrong-key')).status, 401)
  await note('unknown code', get('/download/ZZZZZZ'))
  await note('delete unknown', get('/delete/ZZZZZZ', { method: 'DELETE' }))
  const doomed = keep((await upload(url, [['file', { data: 'delete me' }]])).body.code)
  await note('delete', get(`/delete/${doomed}`, { method: 'DELETE' }))
  await note('download deleted', get(`/download/${doomed}`))
  const once = keep((await upload(url, [['file', { data: 'once' }]])).body.code)
  const onceClaim = keep(claimOf(await note('one-time download', get(`/download/${once}`))))
  await note('exhausted', get(`/download/${once}`))
  await note('resume of a finished claim', get(`/download/${once}`, { headers: { range: 'bytes=1-', 'if-range': `"c-${onceClaim}"` } }))
  t.equal((await upload(url, [['file', { data: 'live' }], ['max_downloads', '2']])).status, 200) // one more live code
  t.comment(JSON.stringify(statuses))
  t.equal(statuses.download, 200)
  t.equal(statuses.resume, 206)
  t.equal(statuses.head, 200)
  t.equal(statuses[`GET /d/${code}`], 200)
  t.equal(statuses.delete, 200)
  t.equal(statuses['unknown code'], 404)
  return secrets
}

/** The secrets of `secrets` found in `log`, with the line each first appears on. */
function leaks (log: string, secrets: Set<string>): string[] {
  const found: string[] = []
  for (const s of secrets) {
    const line = log.split('\n').find(l => l.includes(s))
    if (line !== undefined) found.push(`${s} in ${line.slice(0, 400)}`)
  }
  return found
}

async function fullRun (t: Test, pair: DriverPair, backends: Backends) {
  const env = testEnv(t, pair, backends, { LOG_LEVEL: 'trace' })
  const server = await startServer(t, env)
  let stdout = ''
  server.child.stdout!.on('data', (c: Buffer) => { stdout += c.toString() })
  const secrets = await traffic(t, server.url)
  t.equal(secrets.size, 10, 'codes, upload ids and claims seen')
  if (pair === 's3+redis') {
    // Redis refuses writes: the state errors (ioredis puts the command's keys and arguments on
    // them) are logged at error level with the request.
    const admin = new Redis(redis.url)
    t.teardown(() => admin.disconnect())
    const live = (await upload(server.url, [['file', { data: 'full' }], ['max_downloads', '3']])).body.code
    secrets.add(live)
    await admin.config('SET', 'maxmemory-policy', 'noeviction')
    await admin.config('SET', 'maxmemory', '1')
    try {
      const refused = await fetch(`${server.url}/download/${live}`)
      await refused.arrayBuffer()
      t.ok(refused.status >= 500, `a claim Redis refuses fails (${refused.status})`)
      t.ok(await logged(server, l => l.level === 50), 'the failure is logged at error level')
    } finally {
      await admin.config('SET', 'maxmemory', '0')
    }
  }
  t.equal(await stopServer(server), 0)
  t.ok(stdout.split('\n').length > 60, `the server logged the run (${stdout.split('\n').length} lines)`)
  t.same(leaks(stdout, secrets), [], 'no code, upload id or claim id in the log')
  t.ok(stdout.includes(`"url":"/d/${[...secrets][0]!.slice(0, 2)}****"`), 'a masked code keeps its first two characters')
}

t.test('no code, upload id or claim in the real log of a full run, fs+local (codes_in_logs)', t => fullRun(t, 'fs+local', {}))
t.test('no code, upload id or claim in the real log of a full run, s3+redis (codes_in_logs)', t => fullRun(t, 's3+redis', { redis, s3 }))

t.test('the fixed words of every route stay readable in a log line; anything else is masked', async t => {
  const app = await buildApp(testConfig(t, 'fs+local', {}, { LOG_LEVEL: 'silent' }))
  t.teardown(() => app.close())
  const documented = Object.keys((await app.inject('/openapi.json')).json().paths as Record<string, unknown>)
  t.ok(documented.includes('/download/{code}') && documented.includes('/upload/start'), `routes listed: ${documented.join(' ')}`)
  // Plus the routes the document hides.
  for (const path of [...documented, '/metrics', '/openapi.json', '/assets/{file}']) {
    const fixed = path.split('/').filter(s => !s.startsWith('{')).join('/')
    t.equal(maskUrl(fixed), fixed, `${path}: its fixed words are shown`)
  }
  t.equal(maskUrl('/d/ABC123'), '/d/AB****')
  t.equal(maskUrl('/d/ABC123/extra/'), '/d/AB****/ex****/')
  t.equal(maskUrl('/download/ABC123?upload_id=0123456789abcdefghijkl&x&ABC123=1'), '/download/AB****?upload_id=01****&x****&AB****=1****')
  t.equal(maskUrl('/download/ABC123;jsessionid=1'), '/download/AB****;js****')
  t.equal(maskUrl('/d#ABC123'), '/d#AB****')
  t.equal(maskUrl('http://host/d/ABC123'), 'ht****//ho****/d/AB****')
  t.equal(maskUrl('/assets/app.js', true), '/assets/app.js', 'a served asset keeps its name')
  t.equal(maskUrl('/assets/app.js;ABC123', true), '/assets/app.js;AB****', 'but not what follows a delimiter')
  t.equal(maskUrl('/assets/ABC123/../app.js', true), '/assets/AB****/..****/ap****', 'nor a path that only resolves to a file')
  t.equal(maskUrl('/assets/app.js', false), '/assets/ap****', 'a path that served nothing is masked')
})

t.test('state errors lose their Redis command arguments in the log (unit)', async t => {
  const err = Object.assign(new Error('OOM command not allowed'), { command: { name: 'evalsha', args: ['sha', 1, 'p:file:{ABC123}', 'claimid'] } })
  const wrapped = Object.assign(new Error('outer'), { inner: err, errors: [err] })
  const text = JSON.stringify([serializeError(err), serializeError(wrapped)])
  t.notMatch(text, /ABC123|claimid/)
  t.match(text, /"command":\{"name":"evalsha"\}/)
  t.same(err.command.args.length, 4, 'the error itself is left as it was')
})
