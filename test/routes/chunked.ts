/**
 * The chunked-upload flow through real HTTP, run once per driver pair (fs-local.test.ts,
 * s3-redis.test.ts).
 */
import http from 'node:http'
import type { Test } from 'tap'
import type { AppOverrides } from '../../src/app.js'
import type { ChunkReceipt } from '../../src/blob/index.js'
import { loadConfig } from '../../src/config.js'
import { API_KEY, eventually, rawMultipart, startApp, testConfig, testEnv, type Backends, type DriverPair } from '../helpers/app.js'
import { post, sendChunk, startSession } from '../helpers/chunks.js'
import { listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const MiB = 1024 * 1024
const OTHER_KEY = 'second-key-9876543210'

export function chunkedSuite (t: Test, pair: DriverPair, backends: Backends) {
  const start = (t: Test, env: Record<string, string> = {}, overrides: AppOverrides = {}) =>
    startApp(t, testConfig(t, pair, backends, env), overrides)

  t.test('chunked: out of order and in parallel, verify, complete, download the exact bytes', async t => {
    const { url } = await start(t)
    const data = bytes(5 * 300_000 + 17)
    const chunks = [0, 1, 2, 3, 4, 5].map(i => data.subarray(i * 300_000, Math.min((i + 1) * 300_000, data.length)))
    const id = await startSession(url, [['filename', 'dir/big ✓.bin'], ['total_chunks', '6'], ['max_downloads', '2']])
    t.match(id, /^[A-Za-z0-9_-]{22}$/)
    const replies = await Promise.all([5, 3, 1, 0, 4].map(i => sendChunk(url, id, i, chunks[i]!)))
    t.ok(replies.every(r => r.status === 200 && r.body.success === true && r.body.total_chunks === 6))
    t.same(replies.map(r => r.body.chunk_index).sort(), [0, 1, 3, 4, 5])
    const verify = await post(url, '/upload/verify', [['upload_id', id]])
    t.match(verify.body, { upload_id: id, filename: 'big ✓.bin', total_chunks: 6, received_chunks: 5, missing_chunks: [2], max_downloads: 2, expiry_hours: 24 })
    t.equal((await sendChunk(url, id, 2, chunks[2]!)).body.received_chunks, 6)
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200)
    t.match(done.body.code, /^[A-Za-z0-9]{6}$/)
    const res = await fetch(`${url}/download/${done.body.code}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
    t.match(res.headers.get('content-disposition'), /filename\*=UTF-8''big%20%E2%9C%93\.bin/)
    const second = await fetch(`${url}/download/${done.body.code}`)
    t.equal(second.status, 200, 'max_downloads from start applies')
    await second.arrayBuffer()
    t.equal((await fetch(`${url}/download/${done.body.code}`)).status, 404)
  })

  t.test('chunked: a re-sent chunk replaces the first and counts once', async t => {
    const { url } = await start(t)
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2']])
    t.equal((await sendChunk(url, id, 0, Buffer.from('wrong'))).body.received_chunks, 1)
    t.equal((await sendChunk(url, id, 0, Buffer.from('right'))).body.received_chunks, 1)
    t.equal((await sendChunk(url, id, 1, Buffer.from('!'))).body.received_chunks, 2)
    const { body } = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(await (await fetch(`${url}/download/${body.code}`)).text(), 'right!')
  })

  t.test('chunked: complete with chunks missing is 400 with the list; the session stays open', async t => {
    const { url } = await start(t)
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '4']])
    await sendChunk(url, id, 1, Buffer.from('b'))
    const early = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(early.status, 400)
    t.match(early.body, { code: 'DROPCODE_CHUNKS_MISSING', missing_chunks: [0, 2, 3], received_chunks: 1, total_chunks: 4, error: String })
    for (const i of [0, 2, 3]) await sendChunk(url, id, i, Buffer.from('acd'[[0, 2, 3].indexOf(i)]!))
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200)
    t.equal(await (await fetch(`${url}/download/${done.body.code}`)).text(), 'abcd')
  })

  t.test('chunked: concurrent completes make one file; repeats get the same code; then the session is gone', async t => {
    const running = await start(t)
    const { url } = running
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2'], ['max_downloads', '5']])
    await sendChunk(url, id, 0, bytes(200_000))
    await sendChunk(url, id, 1, bytes(10))
    const results = await Promise.all(Array.from({ length: 8 }, () => post(url, '/upload/complete', [['upload_id', id]])))
    const codes = new Set(results.filter(r => r.status === 200).map(r => r.body.code))
    t.equal(codes.size, 1, 'one code')
    t.ok(results.every(r => r.status === 200 || (r.status === 409 && r.body.code === 'DROPCODE_SESSION_BUSY')), results.map(r => r.status).join(','))
    const again = await post(url, '/upload/complete', [['upload_id', id]])
    t.match(again, { status: 200, body: { code: [...codes][0], size: Number, sha256: String } })
    t.equal((await sendChunk(url, id, 0, Buffer.from('x'))).status, 404)
    t.match((await post(url, '/upload/verify', [['upload_id', id]])).body, { completed: true, code: [...codes][0] }, 'verify reports it completed')
    t.equal((await listStored(running.config)).length, 1, 'exactly one object stored')
  })

  t.test('chunked: verify of a completed session answers completed with the code, size and digest while a repeated complete would; other keys 404 (verify_completed)', async t => {
    let now = Date.now()
    const { url, config } = await start(t, { API_KEYS: `${API_KEY},${OTHER_KEY}` }, { now: () => now })
    const data = bytes(2 * 300_000 + 7, 5)
    const id = await startSession(url, [['filename', 'done ✓.bin'], ['total_chunks', '3'], ['max_downloads', '1'], ['expiry_hours', '2']])
    for (const i of [2, 0, 1]) await sendChunk(url, id, i, data.subarray(i * 300_000, (i + 1) * 300_000))
    const open = await post(url, '/upload/verify', [['upload_id', id]])
    t.equal(open.body.completed, false, 'an open session says completed: false')
    t.notOk('code' in open.body, 'and has no code')
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200)

    const verify = await post(url, '/upload/verify', [['upload_id', id]])
    t.equal(verify.status, 200)
    t.same(verify.body, {
      upload_id: id,
      filename: 'done ✓.bin',
      total_chunks: 3,
      received_chunks: 3,
      missing_chunks: [],
      max_downloads: 1,
      expiry_hours: 2,
      chunks: open.body.chunks,
      completed: true,
      code: done.body.code,
      size: data.length,
      sha256: sha256Of(data)
    }, 'the usual fields, the chunks as listed before completion, and the answer of complete')
    const theirs = await post(url, '/upload/verify', [['upload_id', id]], undefined, OTHER_KEY)
    const none = await post(url, '/upload/verify', [['upload_id', 'C'.repeat(22)]], undefined, OTHER_KEY)
    t.equal(theirs.status, 404, 'another key learns nothing')
    t.same(theirs.body, none.body, 'the same answer as for an unknown session')

    // Used up (its one download): still completed, with the code; the download is 404.
    t.equal(sha256Of(new Uint8Array(await (await fetch(`${url}/download/${done.body.code}`)).arrayBuffer())), sha256Of(data))
    t.equal((await fetch(`${url}/download/${done.body.code}`)).status, 404)
    t.match((await post(url, '/upload/verify', [['upload_id', id]])).body, { completed: true, code: done.body.code })

    now += config.sessionTtlMs - 1
    t.match((await post(url, '/upload/verify', [['upload_id', id]])).body, { completed: true, code: done.body.code }, 'answered to the end of the window')
    t.same((await post(url, '/upload/complete', [['upload_id', id]])).body, done.body, 'as a repeated complete is')
    now += 1
    t.equal((await post(url, '/upload/verify', [['upload_id', id]])).status, 404, 'then verify is 404')
    t.equal((await post(url, '/upload/complete', [['upload_id', id]])).status, 404, 'and so is complete: one window')
  })

  t.test('chunked: a completion taking over from one killed after assembling (chunks consumed) uses the whole object', async t => {
    const running = await start(t)
    const data = bytes(3 * 300_000 - 5, 8)
    const id = await startSession(running.url, [['filename', 'half-done.bin'], ['total_chunks', '3'], ['sha256', sha256Of(data)]])
    for (const i of [0, 1, 2]) t.equal((await sendChunk(running.url, id, i, data.subarray(i * 300_000, (i + 1) * 300_000))).status, 200)
    // What the killed completer did before it died: assemble the object, which frees the chunks.
    const view = (await running.app.state.sessions.get(id, Date.now()))!
    const receipts = [0, 1, 2].map(i => JSON.parse(view.chunks.get(i)!.receipt) as ChunkReceipt)
    await running.app.blobs.completeChunked(view.session.blobKey, view.session.handle, receipts)
    const done = await post(running.url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200, JSON.stringify(done.body))
    t.equal(done.body.sha256, sha256Of(data), 'the object was checked against the declared SHA-256')
    const res = await fetch(`${running.url}/download/${done.body.code}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
  })

  t.test('chunked: zero-byte last chunk and one-chunk sessions', async t => {
    const { url } = await start(t)
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2']])
    await sendChunk(url, id, 1, new Uint8Array(0))
    await sendChunk(url, id, 0, Buffer.from('only'))
    const { body } = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(await (await fetch(`${url}/download/${body.code}`)).text(), 'only')
    const one = await startSession(url, [['filename', 'empty'], ['total_chunks', '1']])
    await sendChunk(url, one, 0, new Uint8Array(0))
    const empty = await post(url, '/upload/complete', [['upload_id', one]])
    const res = await fetch(`${url}/download/${empty.body.code}`)
    t.equal(res.headers.get('content-length'), '0')
  })

  t.test('chunked: bad input is 400, unknown sessions 404, keys 401', async t => {
    const { url } = await start(t, { MAX_TOTAL_CHUNKS: '100' })
    const bad: Array<[string, Array<[string, string]>, string]> = [
      ['/upload/start', [['total_chunks', '2']], 'DROPCODE_MISSING_FIELD'],
      ['/upload/start', [['filename', 'a']], 'DROPCODE_MISSING_FIELD'],
      ['/upload/start', [['filename', ' '], ['total_chunks', '2']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/start', [['filename', 'a'], ['total_chunks', '0']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/start', [['filename', 'a'], ['total_chunks', '101']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/start', [['filename', 'a'], ['total_chunks', '2.5']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/start', [['filename', 'a'], ['total_chunks', '2'], ['max_downloads', '0']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/verify', [], 'DROPCODE_MISSING_FIELD'],
      ['/upload/verify', [['upload_id', '../../etc/passwd']], 'DROPCODE_INVALID_FIELD'],
      ['/upload/complete', [['upload_id', 'x'.repeat(23)]], 'DROPCODE_INVALID_FIELD'],
      ['/upload/chunk', [['upload_id', 'A'.repeat(22)]], 'DROPCODE_MISSING_FIELD']
    ]
    for (const [path, fields, code] of bad) {
      const res = await post(url, path, fields)
      t.equal(res.status, 400, `${path} ${JSON.stringify(fields)}`)
      t.equal(res.body.code, code)
    }
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2']])
    for (const index of ['2', '-1', '1.0', 'x', '01']) {
      const res = await post(url, '/upload/chunk', [['upload_id', id], ['chunk_index', index]], Buffer.from('x'))
      t.equal(res.status, 400, `chunk_index ${index}`)
      t.equal(res.body.code, 'DROPCODE_INVALID_FIELD')
    }
    const late = rawMultipart([{ name: 'chunk', filename: 'b', data: 'x' }, { name: 'upload_id', data: id }, { name: 'chunk_index', data: '0' }])
    const lateRes = await fetch(`${url}/upload/chunk`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': late.contentType }, body: late.body })
    t.equal(lateRes.status, 400, 'fields after the chunk')
    t.match(await lateRes.json(), { code: 'DROPCODE_MISSING_FIELD', error: /before the "chunk"/ })
    const withFile = rawMultipart([{ name: 'upload_id', data: id }, { name: 'x', filename: 'f', data: 'x' }])
    const withFileRes = await fetch(`${url}/upload/verify`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': withFile.contentType }, body: withFile.body })
    t.equal(withFileRes.status, 400, 'a file part where none belongs')
    const unknown = 'B'.repeat(22)
    for (const [path, fields, chunk] of [['/upload/verify', [['upload_id', unknown]]], ['/upload/complete', [['upload_id', unknown]]], ['/upload/chunk', [['upload_id', unknown], ['chunk_index', '0']], Buffer.from('x')]] as const) {
      const res = await post(url, path, [...fields] as Array<[string, string]>, chunk)
      t.equal(res.status, 404, `${path} unknown session`)
      t.equal(res.body.code, 'DROPCODE_SESSION_NOT_FOUND')
    }
    t.equal((await post(url, '/upload/verify', [['upload_id', id]], undefined, 'wrong-key')).status, 401)
    t.same((await post(url, '/upload/verify', [['upload_id', id]])).body.received_chunks, 0, 'bad requests recorded nothing')
  })

  t.test('chunked: MAX_CHUNK_SIZE and MAX_FILE_SIZE answer 413', async t => {
    const { url } = await start(t, { MAX_CHUNK_SIZE: '1000', MAX_FILE_SIZE: '2500' })
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '4']])
    const big = await sendChunk(url, id, 0, bytes(1001))
    t.equal(big.status, 413)
    t.equal(big.body.code, 'DROPCODE_CHUNK_TOO_LARGE')
    for (const i of [0, 1]) t.equal((await sendChunk(url, id, i, bytes(1000))).status, 200)
    const over = await sendChunk(url, id, 2, bytes(1000))
    t.equal(over.status, 413, 'the chunks add up to more than MAX_FILE_SIZE')
    t.equal(over.body.code, 'DROPCODE_FILE_TOO_LARGE')
    const verify = await post(url, '/upload/verify', [['upload_id', id]])
    t.same(verify.body.missing_chunks, [2, 3])
  })

  t.test('chunked: a client that disconnects mid-chunk leaves the chunk missing', async t => {
    const { url } = await start(t)
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2']])
    await new Promise<void>(resolve => {
      const head = rawMultipart([{ name: 'upload_id', data: id }, { name: 'chunk_index', data: '0' }])
      const prefix = head.body.subarray(0, head.body.length - '--dropcode-test-boundary--\r\n'.length)
      const req = http.request(`${url}/upload/chunk`, {
        method: 'POST',
        headers: { 'x-client-key': API_KEY, 'content-type': head.contentType, 'content-length': String(64 * MiB) }
      })
      req.on('error', () => resolve())
      req.write(prefix)
      req.write('--dropcode-test-boundary\r\ncontent-disposition: form-data; name="chunk"; filename="b"\r\n\r\n')
      req.write(bytes(7 * MiB), () => setTimeout(() => { req.destroy(); resolve() }, 200))
    })
    await eventually(async () => {
      const v = await post(url, '/upload/verify', [['upload_id', id]])
      if (v.body.received_chunks !== 0) throw new Error('recorded')
    })
    await eventually(async () => {
      const again = await sendChunk(url, id, 0, bytes(7 * MiB)) // the lock was released
      if (again.status !== 200) throw new Error(String(again.status))
    })
    t.pass('the chunk can be sent again at once')
  })

  t.test('chunked: an abandoned session expires and the sweeper removes its storage', async t => {
    const running = await start(t, { SESSION_TTL_SECONDS: '1', SWEEP_GRACE_SECONDS: '0' })
    const { url } = running
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '3']])
    await sendChunk(url, id, 0, bytes(300_000))
    await sendChunk(url, id, 2, bytes(10))
    t.ok((await listStored(running.config)).length > 0 || pair === 's3+redis', 'chunks are stored')
    await new Promise(resolve => setTimeout(resolve, 1300))
    t.equal((await post(url, '/upload/verify', [['upload_id', id]])).status, 404, 'expired')
    t.same(await running.app.sweeper.sweepOnce(), { deleted: 1, failed: 0 })
    t.same(await listStored(running.config), [], 'nothing left: no chunks, no unfinished upload')
  })

  t.test('chunked: a session belongs to the key that opened it; another key gets what an unknown session gets (session_other_key)', async t => {
    const { url } = await start(t, { API_KEYS: `${API_KEY},${OTHER_KEY}` })
    const id = await startSession(url, [['filename', 'mine.bin'], ['total_chunks', '2']])
    t.equal((await sendChunk(url, id, 0, Buffer.from('mine '))).status, 200)
    const unknown = 'C'.repeat(22)
    const steps: Array<[string, Array<[string, string]>, Uint8Array?]> = [
      ['/upload/chunk', [['chunk_index', '1']], Buffer.from('theirs')],
      ['/upload/verify', []],
      ['/upload/complete', []]
    ]
    for (const [path, fields, chunk] of steps) {
      const theirs = await post(url, path, [['upload_id', id], ...fields], chunk, OTHER_KEY)
      const none = await post(url, path, [['upload_id', unknown], ...fields], chunk, OTHER_KEY)
      t.equal(theirs.status, 404, `${path} with another key`)
      t.same(theirs.body, none.body, `${path}: the same answer as for an unknown session`)
    }
    const verify = await post(url, '/upload/verify', [['upload_id', id]])
    t.same(verify.body.missing_chunks, [1], 'the other key stored nothing')
    t.equal((await sendChunk(url, id, 1, Buffer.from('own'))).status, 200)
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200, 'the owner completes')
    t.equal((await post(url, '/upload/complete', [['upload_id', id]], undefined, OTHER_KEY)).status, 404, 'a repeated complete with another key learns no code')
    t.same((await post(url, '/upload/complete', [['upload_id', id]])).body, done.body, 'the owner\'s repeat does')
    t.equal(await (await fetch(`${url}/download/${done.body.code}`)).text(), 'mine own')
  })

  t.test('chunked: MAX_OPEN_SESSIONS_PER_KEY holds under parallel starts on two instances; completed and expired sessions free their places', async t => {
    let now = Date.now()
    const env = testEnv(t, pair, backends, { API_KEYS: `${API_KEY},${OTHER_KEY}`, MAX_OPEN_SESSIONS_PER_KEY: '5' })
    const [a, b] = [await startApp(t, loadConfig(env), { now: () => now }), await startApp(t, loadConfig(env), { now: () => now })]
    const starts = (n: number, key = API_KEY) => Promise.all(Array.from({ length: n }, (_, i) =>
      post(i % 2 === 0 ? a.url : b.url, '/upload/start', [['filename', 'f'], ['total_chunks', '1']], undefined, key)))
    const first = await starts(40)
    t.equal(first.filter(r => r.status === 200).length, 5, 'exactly 5 of 40 parallel starts open a session')
    const refused = first.filter(r => r.status !== 200)
    t.ok(refused.every(r => r.status === 403 && r.body.code === 'DROPCODE_TOO_MANY_SESSIONS' && r.body.limit === 'max_open_sessions' && r.body.limit_of === 'service'), [...new Set(refused.map(r => `${r.status} ${String(r.body.code)}`))].join(', '))
    t.equal((await starts(1, OTHER_KEY))[0]!.status, 200, 'another key has its own places')
    const id = first.find(r => r.status === 200)!.body.upload_id!
    await sendChunk(b.url, id, 0, Buffer.from('x'))
    t.equal((await post(a.url, '/upload/complete', [['upload_id', id]])).status, 200)
    t.same((await starts(3)).map(r => r.status).sort(), [200, 403, 403], 'a completed session frees its place')
    now += a.config.sessionTtlMs
    t.same((await starts(8)).map(r => r.status).sort(), [200, 200, 200, 200, 200, 403, 403, 403], 'expired sessions free theirs')
  })

  /** The bytes of completed sessions by how their SHA-256 was had (metrics). */
  const digestBytes = async (metricsUrl: string) => {
    const text = await (await fetch(metricsUrl)).text()
    const of = (how: string) => Number(new RegExp(`^dropcode_session_digest_bytes_total\\{how="${how}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0)
    return { folded: of('folded'), read: of('read'), assembled: of('assembled') }
  }
  // ≥ 5 MiB, so that S3 stores every chunk as parts (smaller chunks are assembled, and hashed, by S3's driver).
  const CHUNK = 5 * MiB + 4096
  const pieces = (data: Buffer, size: number) => Array.from({ length: Math.ceil(data.length / size) }, (_, i) => data.subarray(i * size, (i + 1) * size))

  t.test('chunked with chunk_size: chunks sent in order are hashed as they arrive; completion reads nothing back', async t => {
    const { url, metricsUrl } = await start(t)
    const data = bytes(3 * CHUNK - 12_345)
    const chunks = pieces(data, CHUNK)
    const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '3'], ['chunk_size', String(CHUNK)]])
    for (const [i, c] of chunks.entries()) t.equal((await sendChunk(url, id, i, c)).status, 200)
    const done = await post(url, '/upload/complete', [['upload_id', id], ['sha256', sha256Of(data)]])
    t.equal(done.status, 200)
    t.equal(done.body.sha256, sha256Of(data))
    t.same(await digestBytes(metricsUrl), { folded: data.length, read: 0, assembled: 0 })
    const res = await fetch(`${url}/download/${done.body.code}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'the exact bytes')
  })

  t.test('chunked with chunk_size: out of order and in parallel, the chunks are hashed before completion too', async t => {
    const { url, metricsUrl } = await start(t)
    const data = bytes(4 * CHUNK - 1000)
    const chunks = pieces(data, CHUNK)
    const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '4'], ['chunk_size', String(CHUNK)]])
    t.equal((await sendChunk(url, id, 3, chunks[3]!)).status, 200)
    t.equal((await sendChunk(url, id, 0, chunks[0]!)).status, 200)
    t.same((await Promise.all([1, 2].map(i => sendChunk(url, id, i, chunks[i]!)))).map(r => r.status), [200, 200])
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.body.sha256, sha256Of(data))
    const how = await digestBytes(metricsUrl)
    t.equal(how.folded + how.read, data.length)
    t.equal(how.read, 0, 'chunks that arrived out of order were kept in memory as they streamed, and folded as the prefix reached them, before completion')
    t.equal(sha256Of(new Uint8Array(await (await fetch(`${url}/download/${done.body.code}`)).arrayBuffer())), sha256Of(data))
  })

  t.test('chunked with chunk_size: a chunk replaced after it was hashed, and a shorter last chunk, still give the exact file and digest', async t => {
    const { url, metricsUrl } = await start(t)
    const first = bytes(2 * CHUNK + 5000)
    const chunks = pieces(first, CHUNK)
    const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '3'], ['chunk_size', String(CHUNK)]])
    for (const [i, c] of chunks.entries()) t.equal((await sendChunk(url, id, i, c)).status, 200)
    const other = Buffer.from(chunks[1]!).fill(7, 0, 100)
    t.equal((await sendChunk(url, id, 1, other)).status, 200, 'chunk 1 again, other bytes')
    t.equal((await sendChunk(url, id, 2, chunks[2]!.subarray(0, 10))).status, 200, 'the last chunk again, shorter')
    const data = Buffer.concat([chunks[0]!, other, chunks[2]!.subarray(0, 10)])
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.body.size, data.length)
    t.equal(done.body.sha256, sha256Of(data))
    const how = await digestBytes(metricsUrl)
    t.equal(how.folded + how.read, data.length)
    t.ok(how.read >= other.length, 'the prefix stopped before the replaced chunk')
    const res = await fetch(`${url}/download/${done.body.code}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
  })

  t.test('chunked with chunk_size: chunks of another size are refused and record nothing; the declaration is checked at start', async t => {
    const { url } = await start(t, { MAX_CHUNK_SIZE: '1000', MAX_FILE_SIZE: '2500' })
    t.equal((await post(url, '/upload/start', [['filename', 'a'], ['total_chunks', '2'], ['chunk_size', '1001']])).body.code, 'DROPCODE_INVALID_FIELD')
    t.equal((await post(url, '/upload/start', [['filename', 'a'], ['total_chunks', '2'], ['chunk_size', '0']])).body.code, 'DROPCODE_INVALID_FIELD')
    const huge = await post(url, '/upload/start', [['filename', 'a'], ['total_chunks', '4'], ['chunk_size', '1000']])
    t.same([huge.status, huge.body.code], [413, 'DROPCODE_FILE_TOO_LARGE'], '3 full chunks exceed MAX_FILE_SIZE')
    const id = await startSession(url, [['filename', 'a'], ['total_chunks', '3'], ['chunk_size', '100']])
    const short = await sendChunk(url, id, 0, bytes(99))
    t.same([short.status, short.body.code], [400, 'DROPCODE_CHUNK_SIZE_MISMATCH'])
    const long = await sendChunk(url, id, 1, bytes(101))
    t.same([long.status, long.body.code], [413, 'DROPCODE_CHUNK_TOO_LARGE'])
    const lastLong = await sendChunk(url, id, 2, bytes(101))
    t.same([lastLong.status, lastLong.body.code], [413, 'DROPCODE_CHUNK_TOO_LARGE'], 'the last chunk holds at most chunk_size')
    t.same((await post(url, '/upload/verify', [['upload_id', id]])).body.missing_chunks, [0, 1, 2], 'nothing recorded')
    const data = bytes(250)
    for (const i of [2, 0, 1]) t.equal((await sendChunk(url, id, i, data.subarray(i * 100, (i + 1) * 100))).status, 200)
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.equal(done.body.size, 250)
    t.equal(Buffer.from(await (await fetch(`${url}/download/${done.body.code}`)).arrayBuffer()).equals(data), true)
  })

  t.test('chunked: sha256 at /upload/complete; a mismatch publishes nothing and closes the session', async t => {
    const { url } = await start(t)
    const data = bytes(1000)
    const open = async () => {
      const id = await startSession(url, [['filename', 'a'], ['total_chunks', '2'], ['chunk_size', '600']])
      for (const i of [0, 1]) await sendChunk(url, id, i, data.subarray(i * 600, (i + 1) * 600))
      return id
    }
    const bad = await open()
    const wrong = await post(url, '/upload/complete', [['upload_id', bad], ['sha256', 'ab'.repeat(32)]])
    t.same([wrong.status, wrong.body.code, wrong.body.sha256], [400, 'DROPCODE_DIGEST_MISMATCH', sha256Of(data)])
    t.equal((await post(url, '/upload/verify', [['upload_id', bad]])).status, 404, 'the session is closed')
    const good = await open()
    const done = await post(url, '/upload/complete', [['upload_id', good], ['sha256', sha256Of(data).toUpperCase()]])
    t.equal(done.status, 200)
    const again = await post(url, '/upload/complete', [['upload_id', good], ['sha256', 'ab'.repeat(32)]])
    t.same([again.status, again.body.code], [400, 'DROPCODE_DIGEST_MISMATCH'], 'a repeated complete expecting another digest')
    t.equal((await post(url, '/upload/complete', [['upload_id', good]])).body.code, done.body.code, 'the file stays')
    t.equal((await fetch(`${url}/download/${done.body.code}`)).status, 200)
  })
}
