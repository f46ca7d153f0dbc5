/**
 * Property-based hardening with fast-check (real sockets), run by fuzz-fs.test.ts (fs + LMDB:
 * both properties) and fuzz-s3.test.ts (S3 + Redis: the upload property, where what a refused
 * upload could leave is an unfinished multipart upload).
 *
 * What this pins, and why: multipart-abuse.ts checks hostile cases one by one; here
 * random inputs look for the ones nobody thought of.
 *   (a) Random multipart bodies (random parts, names, values, files, truncation) at every
 *       upload endpoint with a valid key: always answered in time, never a 5xx, and every
 *       error is the JSON body `{ error, code }`. Afterwards storage and the cleanup index hold
 *       exactly what the 200 answers account for: one object per published code, and under
 *       the key of each still-open session only its chunks (fs: one file per received chunk;
 *       S3: chunk objects or one unfinished multipart upload), one index entry per code and per
 *       open session; nothing under any other key (no `.part`, no stray multipart upload).
 *   (b) Random path segments as download codes (GET/HEAD /download, DELETE /delete): always
 *       404 (README: "Malformed codes … answer 404 without touching any store"), never 5xx;
 *       download errors are the same HTML page whatever the input (so it reflects none of it),
 *       delete errors the JSON DROPCODE_FILE_NOT_FOUND body. Afterwards a live file is
 *       untouched and nothing else is stored.
 * Runs are sized to keep the file well under a minute.
 */
import fc from 'fast-check'
import type { Test } from 'tap'
import { API_KEY, type RunningApp } from '../helpers/app.js'
import { startSession } from '../helpers/chunks.js'
import { describeStored, listStored } from '../helpers/storage.js'
import { BOUNDARY, json, Multipart, send, storageState, type RawResponse } from './raw.js'

/** Starts the app under test, on the drivers of the file that runs the suite. */
export type Start = (t: Test) => Promise<RunningApp>

const ENDPOINTS = ['/upload', '/upload/start', '/upload/chunk', '/upload/verify', '/upload/complete'] as const
type Endpoint = typeof ENDPOINTS[number]

/** Placeholders replaced by real session ids when a request is sent. */
const SESSION_ONE = '<session total_chunks=1>'
const SESSION_THREE = '<session total_chunks=3>'
const SESSION_MANY = '<session total_chunks=10000>'

const NAMES = ['file', 'chunk', 'max_downloads', 'expiry_hours', 'upload_id', 'chunk_index', 'filename', 'total_chunks', '__proto__', 'constructor', 'prototype']

const name = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...NAMES) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 12 }) }
)

const value = fc.oneof(
  fc.constantFrom('', '0', '1', '2', '3', '24', '720', '721', '1000', '1001', '10000', '10001', '-1', '01', '1.5', '1e3', ' 2', '2 ', '+1', '0x10',
    '99999999999999999999', '9007199254740993', 'NaN', 'Infinity', 'a.bin', '../../etc/passwd', '\r\n', 'a\r\nb', `\r\n--${BOUNDARY}\r\n`,
    `--${BOUNDARY}--`, '\u0000', '\u202Egnp.exe', SESSION_ONE, SESSION_THREE, SESSION_MANY, 'AAAAAAAAAAAAAAAAAAAAAA'),
  fc.nat().map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.stringMatching(/^[A-Za-z0-9_-]{22}$/),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer({ min: 4000, max: 6000 }).map(n => `<7 x ${n}>`) // around fieldSize (4096); expanded in body()
)

interface Part {
  kind: 'field' | 'file'
  /** undefined: a disposition without a name parameter. */
  name: string | undefined
  value: string
  filename: string | undefined
  contentType: string | undefined
}

const part: fc.Arbitrary<Part> = fc.record({
  kind: fc.constantFrom('field', 'file'),
  name: fc.option(name, { nil: undefined, freq: 10 }),
  value,
  filename: fc.option(fc.oneof(fc.constantFrom('a.txt', '../x.bin', 'a"b.txt', 'a\r\nb.txt', ''), fc.string({ unit: 'grapheme', maxLength: 20 })), { nil: undefined }),
  contentType: fc.option(fc.constantFrom('application/json', 'text/plain; charset=utf-16le', 'application/octet-stream', 'image/png'), { nil: undefined })
})

/** The well-formed parts of each endpoint (random parts are mixed into them half the time). */
function skeleton (endpoint: Endpoint, index: number): Part[] {
  const field = (n: string, v: string): Part => ({ kind: 'field', name: n, value: v, filename: undefined, contentType: undefined })
  const file = (n: string): Part => ({ kind: 'file', name: n, value: 'some bytes', filename: 'f.bin', contentType: undefined })
  switch (endpoint) {
    case '/upload': return [field('max_downloads', '2'), file('file')]
    case '/upload/start': return [field('filename', 'a.bin'), field('total_chunks', '2')]
    case '/upload/chunk': {
      const [session, chunkIndex] = ([[SESSION_MANY, index], [SESSION_THREE, index % 3], [SESSION_ONE, 0]] as const)[index % 3]!
      return [field('upload_id', session), field('chunk_index', String(chunkIndex)), file('chunk')]
    }
    case '/upload/verify': return [field('upload_id', index % 2 === 0 ? SESSION_ONE : SESSION_THREE)]
    case '/upload/complete': return [field('upload_id', index % 2 === 0 ? SESSION_ONE : SESSION_THREE)]
  }
}

const request = fc.record({
  endpoint: fc.constantFrom(...ENDPOINTS),
  wellFormed: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  index: fc.nat({ max: 29 }),
  extra: fc.oneof(fc.constant([]), fc.array(part, { maxLength: 5 })),
  insertAt: fc.nat(),
  /** Cut the body: drop this many bytes from its end (closing delimiter first), or keep this many. */
  cut: fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.record({ fromEnd: fc.boolean(), bytes: fc.nat({ max: 2000 }) }) }
  )
})

function body (parts: Part[], sessions: Record<string, string>): Buffer {
  const swap = (s: string) => s.replaceAll(SESSION_ONE, sessions[SESSION_ONE]!).replaceAll(SESSION_THREE, sessions[SESSION_THREE]!).replaceAll(SESSION_MANY, sessions[SESSION_MANY]!)
    .replace(/<7 x (\d+)>/g, (_, n: string) => '7'.repeat(Number(n)))
  const form = new Multipart()
  for (const p of parts) {
    const after = p.contentType !== undefined ? [`content-type: ${p.contentType}`] : []
    const named = p.name === undefined ? 'form-data' : `form-data; name="${p.name}"`
    if (p.kind === 'file') form.part(`${named}; filename="${p.filename ?? 'f.bin'}"`, Buffer.from(swap(p.value)), { after })
    else form.part(named, Buffer.from(swap(p.value)), { after })
  }
  return form.body()
}

/** Asserts inside a property: throws with the request and answer on failure. */
function check (ok: boolean, what: string, res: RawResponse) {
  if (!ok) throw new Error(`${what}: ${res.status} ${res.body.toString().slice(0, 300)}`)
}

/** (a): random multipart bodies at every upload endpoint, then storage accounted for by the 200s. */
export function uploadFuzz (t: Test, start: Start, numRuns: number) {
  t.test('(a) random multipart bodies at every upload endpoint', async t => {
    const running = await start(t)
    const sessions: Record<string, string> = {
      [SESSION_ONE]: await startSession(running.url, [['filename', 'one.bin'], ['total_chunks', '1']]),
      [SESSION_THREE]: await startSession(running.url, [['filename', 'three.bin'], ['total_chunks', '3']]),
      [SESSION_MANY]: await startSession(running.url, [['filename', 'many.bin'], ['total_chunks', '10000']])
    }
    const codes = new Set<string>()
    const started = new Set<string>(Object.values(sessions))
    const statuses: Record<string, number> = {}

    await fc.assert(fc.asyncProperty(request, async r => {
      const parts = r.wellFormed ? skeleton(r.endpoint, r.index) : []
      parts.splice(r.insertAt % (parts.length + 1), 0, ...r.extra)
      let payload = body(parts, sessions)
      if (r.cut !== undefined) payload = payload.subarray(0, r.cut.fromEnd ? Math.max(0, payload.length - 1 - r.cut.bytes) : r.cut.bytes)
      const res = await send(running.url, {
        path: r.endpoint,
        headers: { 'x-client-key': API_KEY, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body: payload
      })
      statuses[`${r.endpoint} ${res.status}`] = (statuses[`${r.endpoint} ${res.status}`] ?? 0) + 1
      check(res.status < 500, 'no 5xx', res)
      check(/^application\/json/.test(String(res.headers['content-type'])), 'a JSON answer', res)
      const answer = json(res)
      if (res.status >= 400) check(typeof answer.error === 'string' && typeof answer.code === 'string', '{ error, code }', res)
      if (res.status === 200 && typeof answer.code === 'string') codes.add(answer.code)
      if (res.status === 200 && typeof answer.upload_id === 'string' && r.endpoint === '/upload/start') started.add(answer.upload_id)
    }), { numRuns })
    t.comment(JSON.stringify(statuses))

    // Everything stored is accounted for by a 200: published files and open sessions' chunks.
    const { files, sessions: sessionStore } = running.app.state
    const published = new Set<string>()
    for (const code of codes) {
      t.equal((await send(running.url, { method: 'HEAD', path: `/download/${code}` })).status, 200, `published code ${code} is live`)
      const found = await files.lookup(code, Date.now())
      if (found.ok) published.add(found.file.blobKey)
    }
    /** Open sessions' object keys → their received chunks. */
    const open = new Map<string, number>()
    for (const id of started) {
    // A completed session is gone from the store: its chunks are its file's now.
      const view = await sessionStore.get(id, Date.now())
      if (view !== null) open.set(view.session.blobKey, view.chunks.size)
    }
    const chunks = [...open.values()].reduce((a, b) => a + b, 0)
    const fsLayout = running.config.storage.driver === 'fs'
    const expected = { objects: [...published].sort(), strays: [] as string[], chunksMatch: true, due: codes.size + open.size }
    const actual = async () => {
      const stored = await listStored(running.config)
      const items = stored.map(item => ({ item, ...describeStored(running.config, item) }))
      const chunkItems = items.filter(i => i.kind === 'chunk' && open.has(i.key!))
      return {
        objects: items.filter(i => i.kind === 'object').map(i => i.key!).sort(),
        strays: items.filter(i => i.key === undefined || !(published.has(i.key) ? i.kind === 'object' : open.has(i.key) && i.kind !== 'object')).map(i => i.item),
        // fs: one file per received chunk; S3: chunk objects (small chunks) or parts of the
        // session's multipart upload, which a listing does not show one by one.
        chunksMatch: fsLayout ? chunkItems.length === chunks : chunkItems.length <= chunks,
        due: (await storageState(running)).due
      }
    }
    let now = await actual()
    const deadline = Date.now() + 3000
    while (Date.now() < deadline && JSON.stringify(now) !== JSON.stringify(expected)) {
      await new Promise(resolve => setTimeout(resolve, 50))
      now = await actual()
    }
    t.comment(`${codes.size} files published, ${started.size} sessions started, ${open.size} open with ${chunks} chunks`)
    t.same(now, expected, 'storage and cleanup index hold exactly what the 200 answers account for')
  })
}

/** A path segment: URL-encoded random text, raw percent sequences, or valid-looking codes. */
const segment = fc.oneof(
  fc.string({ minLength: 1, maxLength: 30 }).map(encodeURIComponent),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).map(encodeURIComponent),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }).map(s => { try { return encodeURIComponent(s) } catch { return '%ED%A0%80' } }),
  fc.stringMatching(/^[A-Za-z0-9]{6}$/),
  fc.array(fc.constantFrom('%00', '%2F', '%2f', '%2E', '%2E%2E', '..', '%', '%z', '%zz', '%C0%AF', '%C0%80', '%FF', '%ED%A0%80',
    '%EF%BC%A1', '%D0%90', '%CE%91', '%E2%80%AE', '%0D%0A', '%3Cscript%3E', '%22', '%27', '%25', '%u0041', '%09', '%20', '+', ';', ':', '@', '=',
    'A', 'b', '7', 'Zz9'), { minLength: 1, maxLength: 8 }).map(a => a.join('')),
  fc.integer({ min: 7, max: 3000 }).map(n => 'A'.repeat(n))
)

/** A segment that decodes to `..`. */
function dotSegment (segment: string): boolean {
  try { return decodeURIComponent(segment) === '..' } catch { return false }
}

/** (b): random codes at the download and delete endpoints (no store is touched: one driver pair is enough). */
export function codeFuzz (t: Test, start: Start, numRuns: number) {
  t.test('(b) random codes at GET/HEAD /download and DELETE /delete', async t => {
    const running: RunningApp = await start(t)
    // A live file that nothing here may touch.
    const live = await fetch(`${running.url}/upload`, {
      method: 'POST',
      headers: { 'x-client-key': API_KEY, 'content-type': new Multipart().contentType },
      body: new Multipart().file('file', 'keep me').field('max_downloads', '2').body()
    })
    const liveCode = (await live.json() as { code: string }).code
    const before = await storageState(running)
    // The page any unknown code gets; every malformed code must get exactly this page.
    const page = (await send(running.url, { method: 'GET', path: '/download/zzzzz' })).body.toString()
    t.match(page, /File not available/)

    const statuses: Record<string, number> = {}
    await fc.assert(fc.asyncProperty(segment, fc.constantFrom('GET', 'HEAD', 'DELETE'), async (code, method) => {
      fc.pre(code !== liveCode)
      const path = method === 'DELETE' ? `/delete/${code}` : `/download/${code}`
      const res = await send(running.url, { method, path })
      statuses[`${method} ${res.status}`] = (statuses[`${method} ${res.status}`] ?? 0) + 1
      if (dotSegment(code)) {
      // `..` (also as %2E%2E, RFC 3986 §2.3) is a dot segment: the router resolves it to the
      // parent path, `/`, so this is a request for the web page (GET, HEAD) or for no endpoint
      // (DELETE), not for a code.
        if (method === 'DELETE') check(res.status === 404 && json(res).code === 'DROPCODE_ROUTE_NOT_FOUND', `${method} ${path}: 404 ROUTE_NOT_FOUND`, res)
        else check(res.status === 200 && /^text\/html/.test(String(res.headers['content-type'])), `${method} ${path}: the web page at /`, res)
        return
      }
      check(res.status === 404, `${method} ${path.slice(0, 80)}: 404`, res)
      if (method === 'DELETE') {
        const answer = json(res)
        check(answer.code === 'DROPCODE_FILE_NOT_FOUND' && typeof answer.error === 'string', `${path.slice(0, 80)}: JSON FILE_NOT_FOUND`, res)
      } else {
        check(/^text\/html/.test(String(res.headers['content-type'])), `${method} ${path.slice(0, 80)}: HTML`, res)
        if (method === 'GET') check(res.body.toString() === page, `GET ${path.slice(0, 80)}: the standard page, reflecting nothing`, res)
      }
    }), { numRuns })
    t.comment(JSON.stringify(statuses))

    t.same(await storageState(running), before, 'nothing stored or scheduled beyond the live file')
    const head = await send(running.url, { method: 'HEAD', path: `/download/${liveCode}` })
    t.equal(head.status, 200, 'the live file is untouched')
    t.equal((await send(running.url, { method: 'GET', path: `/download/${liveCode}` })).body.toString(), 'keep me')
    t.equal((await send(running.url, { method: 'GET', path: `/download/${liveCode}` })).status, 200, 'both downloads were left')
  })
}
