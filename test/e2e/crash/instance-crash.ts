/**
 * kill -9 of one of two instances during mixed traffic (issue 15). Two real server processes
 * behind a round-robin proxy share a redis-server and radosgw (instance-crash-s3.test.ts), or
 * one DATA_DIR (the embedded pair: files and LMDB shared by two processes,
 * instance-crash-fs.test.ts). When the instance dies it is in the middle of uploads, downloads
 * and a chunk; the test then checks, from the storage and the state store themselves:
 * - uploads in flight on the dead instance failed for their clients and left no record;
 * - the chunked session continues on the survivor (verify → resend → complete, bytes identical);
 * - every download was counted exactly once: cut ones resume on the survivor counting nothing;
 * - after the sweeper runs, no orphan object, unfinished multipart upload or key remains.
 */
import http from 'node:http'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { buildApp } from '../../../src/app.js'
import { loadConfig, type Config } from '../../../src/config.js'
import { openLmdbEnv } from '../../../src/state/lmdb/env.js'
import { createLmdbKeys } from '../../../src/state/lmdb/keys.js'
import { createRedisBackend } from '../../../src/state/redis/index.js'
import { envKeyName } from '../../../src/services/keys.js'
import { API_KEY, testEnv, upload, type Answer, type Backends, type DriverPair } from '../../helpers/app.js'
import { post, sendChunk, startSession } from '../../helpers/chunks.js'
import { startProxy, type Proxy } from '../../helpers/round-robin-proxy.js'
import { killServer, startServer } from '../../helpers/server-process.js'
import { slowChunk } from '../../helpers/slow-chunk.js'
import { describeStored, listStored } from '../../helpers/storage.js'
import { bytes, sha256Of } from '../../helpers/streams.js'
import { until } from '../../helpers/until.js'

const MiB = 1024 * 1024
const BOUNDARY = 'dropcode-crash-upload'

/** Sends harmless requests until the proxy's next request goes to `backend`. */
async function landOn (proxy: Proxy, backend: string) {
  await until(async () => {
    if (proxy.peek() === backend) return true
    await (await fetch(`${proxy.url}/healthz`)).text()
    return false
  }, 10_000, `the proxy's turn for ${backend}`, 0)
}

/** Resolves once the proxy has routed one more request than when called. */
async function routed (proxy: Proxy) {
  const before = proxy.routed.length
  await until(() => proxy.routed.length > before, 10_000, 'one more request routed', 5)
}

/** An upload whose body is sent in two steps, so it can be in flight when an instance dies. */
function slowUpload (url: string, data: Buffer) {
  const req = http.request(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'transfer-encoding': 'chunked' } })
  const answer = new Promise<{ status: number, body: Answer }>((resolve, reject) => {
    req.once('error', reject)
    req.once('response', res => {
      let text = ''
      res.setEncoding('utf8').on('data', (c: string) => { text += c })
      res.once('error', reject)
      res.once('end', () => { try { resolve({ status: res.statusCode!, body: JSON.parse(text) as Answer }) } catch { reject(new Error(`not JSON: ${text}`)) } })
    })
  })
  answer.catch(() => {})
  req.write(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="up.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`)
  const half = data.length - 2 * MiB
  return {
    answer,
    first: () => new Promise<void>(resolve => req.write(data.subarray(0, half), () => resolve())),
    rest: () => { req.end(Buffer.concat([data.subarray(half), Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]), () => {}); return answer }
  }
}

/** A download that reads its headers and first bytes, then stops reading until `finish`. */
async function heldDownload (url: string, code: string) {
  const received: Buffer[] = []
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => http.get(`${url}/download/${code}`, resolve).once('error', reject))
  const ended = new Promise<boolean>(resolve => {
    res.on('data', (c: Buffer) => { received.push(c) })
    res.once('end', () => resolve(true))
    res.once('close', () => resolve(res.complete))
    res.once('error', () => resolve(false))
  })
  await until(() => received.length > 0, 10_000, 'the first bytes of the download')
  res.pause()
  return {
    status: res.statusCode!,
    etag: res.headers.etag!,
    finish: async () => { res.resume(); const complete = await ended; return { complete, body: Buffer.concat(received) } }
  }
}

/** What the state store holds, read from the store itself (not through the service). */
interface StateView {
  /** Every file record: code → its downloads and object key. */
  files (): Promise<Map<string, { downloads: number, blobKey: string }>>
  /** Every record, index entry and counter, by name (a completed session's answer: `done(id)`), but the keys' ledgers. */
  entries (): Promise<string[]>
  /** The bytes the ledger of key `name` holds at `now` (its quota's count). */
  held (name: string, now: number): Promise<number>
  done (id: string): string
  /** Whether a completed session's answer is set to expire. */
  expires (id: string): Promise<boolean>
  close (): Promise<void>
}

function redisView (url: string, prefix: string): StateView {
  const direct = new Redis(url)
  const keys = async () => (await direct.keys(`${prefix}*`)).map(k => k.slice(prefix.length)).sort()
  return {
    async files () {
      const out = new Map<string, { downloads: number, blobKey: string }>()
      for (const key of (await keys()).filter(k => /^file:\{[^}]+\}$/.test(k))) {
        const [downloads, blobKey] = await direct.hmget(prefix + key, 'downloads', 'blobKey')
        out.set(key.slice(6, -1), { downloads: Number(downloads), blobKey: blobKey! })
      }
      return out
    },
    entries: async () => (await keys()).filter(k => !k.startsWith('usage:')),
    held: async (name, now) => (await createRedisBackend({ client: direct, prefix }).keys.usage(name, now)).bytes,
    done: id => `done:{${id}}`,
    expires: async id => await direct.pttl(`${prefix}done:{${id}}`) > 0,
    close: async () => { direct.disconnect() }
  }
}

/**
 * The embedded store, opened beside the servers (LMDB serves several processes; the sweep below
 * opens it in this process too, so each read opens and closes it). The expiry index is left
 * out: it only says when housekeeping looks at the records listed.
 */
function lmdbView (config: Config): StateView {
  const dir = path.join((config.state as { dir: string }).dir, 'lmdb')
  const read = async <T>(fn: (env: Awaited<ReturnType<typeof openLmdbEnv>>) => T) => {
    const env = await openLmdbEnv(dir)
    try { return fn(env) } finally { await env.close() }
  }
  const DBS = ['files', 'cleanup', 'due', 'sessions', 'chunks', 'locks', 'places', 'done', 'counters'] as const
  return {
    files: () => read(env => new Map([...env.files.getRange()].map(({ key, value }) => [key, { downloads: value.downloads, blobKey: value.blobKey }]))),
    entries: () => read(env => DBS.flatMap(name => [...env[name].getKeys()].map(key => `${name}:${Array.isArray(key) ? key.join(',') : String(key)}`)).sort()),
    held: async (name, now) => (await (await read(env => createLmdbKeys(env).usage(name, now)))).bytes,
    done: id => `done:${id}`,
    expires: id => read(env => [...env.expiry.getKeys()].some(([, kind, of]) => kind === 'd' && of === id)),
    close: async () => {}
  }
}

export function instanceCrashSuite (t: Test, pair: DriverPair, backends: Backends) {
  t.test('kill -9 of one of two instances during mixed traffic', async t => {
    const env = testEnv(t, pair, backends, { CHUNK_LOCK_SECONDS: '3', UPLOAD_TIMEOUT_SECONDS: '60', S3_PART_SIZE: String(5 * MiB) })
    const config = loadConfig(env)
    const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
    const proxy = await startProxy([a.url, b.url])
    t.teardown(() => proxy.close())
    const state = pair === 's3+redis' ? redisView(backends.redis!.url, env.REDIS_PREFIX!) : lmdbView(config)
    t.teardown(() => state.close())

    const contents = new Map<string, Buffer>() // every code answered to a client → its bytes
    const served = new Map<string, number>() // code → downloads answered 200
    const serve = (code: string) => served.set(code, (served.get(code) ?? 0) + 1)
    const smallTraffic = async (label: string, n: number) => {
      for (let i = 0; i < n; i++) {
        const data = bytes(1000 + i, i + 11)
        const up = await upload(proxy.url, [['file', { data, filename: `${label}-${i}.bin` }], ['max_downloads', '3']])
        t.equal(up.status, 200, `${label}: upload ${i}`)
        const code = up.body.code
        contents.set(code, data)
        const res = await fetch(`${proxy.url}/download/${code}`)
        t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), `${label}: download ${i}`)
        serve(code)
      }
    }

    // Before the crash: small uploads and downloads spread over both instances, a large file,
    // and a chunked session with three of its five chunks.
    await smallTraffic('before', 4)
    const big = bytes(48 * MiB, 5)
    const bigUp = await upload(proxy.url, [['file', { data: big, filename: 'big.bin' }], ['max_downloads', '10']])
    const bigCode = bigUp.body.code
    contents.set(bigCode, big)
    const chunked = bytes(5 * MiB - 777, 9)
    const piece = (i: number) => chunked.subarray(i * MiB, (i + 1) * MiB)
    const sessionId = await startSession(proxy.url, [['filename', 'chunked.bin'], ['total_chunks', '5'], ['max_downloads', '3']])
    for (const i of [0, 1, 2]) t.equal((await sendChunk(proxy.url, sessionId, i, piece(i))).status, 200)

    // In flight when a dies: four uploads past their first part, four downloads of the large
    // file with their first bytes read, and chunk 3 (on a).
    const uploads = []
    for (const backend of [a.url, b.url, a.url, b.url]) {
      await landOn(proxy, backend)
      const data = bytes(12 * MiB, uploads.length + 21)
      const up = slowUpload(proxy.url, data)
      uploads.push({ backend, data, up })
      await routed(proxy)
    }
    await Promise.all(uploads.map(u => u.up.first()))
    const downloads = []
    for (const backend of [a.url, b.url, a.url, b.url]) {
      await landOn(proxy, backend)
      downloads.push({ backend, held: await heldDownload(proxy.url, bigCode) })
    }
    await landOn(proxy, a.url)
    const cut = slowChunk(proxy.url, sessionId, 3)
    await routed(proxy)
    await cut.write(piece(3))
    await cut.holdAfterChunk()
    // Everything is in flight: the uploads are writing their first parts to S3, and a has stored
    // chunk 3 as an object but not recorded it (the rest of its request has not arrived).
    await until(async () => (await listStored(config)).some(k => { const d = describeStored(config, k); return d.kind === 'chunk' && d.index === 3 }), 20_000, 'chunk 3 stored', 50)
    await sleep(500)
    t.same(proxy.routed.filter(r => r.method === 'POST' && r.path === '/upload').slice(-4).map(r => r.backend), [a.url, b.url, a.url, b.url], 'uploads in flight on both instances')

    await killServer(a)
    proxy.markDown(a.url)

    // Uploads: those on a failed for their clients; those on b got a code.
    for (const u of uploads) {
      const outcome = await u.up.rest().then(r => r, () => ({ status: 0, body: {} as Answer }))
      if (u.backend === a.url) t.ok(outcome.status === 502 || outcome.status === 0, `an upload in flight on the dead instance failed (${outcome.status})`)
      else {
        t.equal(outcome.status, 200, 'an upload in flight on the survivor succeeded')
        contents.set(outcome.body.code, u.data)
      }
    }
    // Downloads: each was counted once when it started; those cut by the crash resume on b.
    for (const { backend, held } of downloads) {
      t.equal(held.status, 200)
      serve(bigCode)
      const { complete, body } = await held.finish()
      if (backend === b.url) {
        t.ok(complete && sha256Of(body) === sha256Of(big), 'a download on the survivor finished')
        continue
      }
      t.notOk(complete, 'a download on the dead instance was cut')
      const rest = await fetch(`${proxy.url}/download/${bigCode}`, { headers: { range: `bytes=${body.length}-`, 'if-range': held.etag } })
      t.equal(rest.status, 206, 'resumed on the survivor')
      t.equal(sha256Of(Buffer.concat([body, Buffer.from(await rest.arrayBuffer())])), sha256Of(big), 'resumed bytes complete the file')
    }
    // The chunked session: verify, resend the chunk the dead instance held, complete.
    const lost = await cut.answer.then(r => r.status, () => 0)
    t.ok(lost === 502 || lost === 0, `the chunk in flight on the dead instance failed (${lost === 0 ? 'connection cut' : '502 from the proxy'})`)
    t.same((await post(proxy.url, '/upload/verify', [['upload_id', sessionId]])).body.missing_chunks, [3, 4])
    let resent = await sendChunk(proxy.url, sessionId, 3, piece(3))
    for (let tries = 0; resent.status === 409 && tries < 20; tries++) {
      await sleep(500)
      resent = await sendChunk(proxy.url, sessionId, 3, piece(3))
    }
    t.equal(resent.status, 200, 'chunk 3 resent to the survivor once the dead lock ran out')
    t.equal((await sendChunk(proxy.url, sessionId, 4, piece(4))).status, 200)
    const done = await post(proxy.url, '/upload/complete', [['upload_id', sessionId]])
    t.equal(done.status, 200)
    const chunkedCode = done.body.code
    contents.set(chunkedCode, chunked)
    const res = await fetch(`${proxy.url}/download/${chunkedCode}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(chunked), 'chunked file: bytes identical')
    serve(chunkedCode)
    await smallTraffic('after', 3)

    // The state holds a record for exactly the codes answered, each counting exactly its downloads.
    const records = await state.files()
    t.same([...records.keys()].sort(), [...contents.keys()].sort(), 'no record for the failed uploads')
    for (const code of contents.keys()) {
      t.equal(records.get(code)?.downloads, served.get(code) ?? 0, `downloads of ${code} counted once each`)
    }

    // The sweeper, an hour later: the dead instance's uploads are past UPLOAD_TIMEOUT.
    const sweepLater = async () => {
      const app = await buildApp(config, { now: () => Date.now() + 3_600_000 })
      try {
        await app.ready()
        return await app.sweeper.sweepOnce()
      } finally {
        await app.close()
      }
    }
    const swept = await sweepLater()
    t.equal(swept.failed, 0)
    t.ok(swept.deleted >= 2, `the dead instance's uploads were swept (${swept.deleted} objects)`)
    // Each whole object by its key; anything else by its own name, so it fails the comparison.
    const stored = (await listStored(config)).map(item => { const d = describeStored(config, item); return d.kind === 'object' ? d.key : item })
    t.same(stored.sort(), [...records.values()].map(r => r.blobKey).sort(), 'storage holds the live files only: no orphan object, no unfinished multipart upload or .part file')

    // Deleting every file and sweeping again leaves nothing but the layout marker and the completed
    // session's answer (it expires with SESSION_TTL).
    for (const code of contents.keys()) t.equal((await fetch(`${proxy.url}/delete/${code}`, { method: 'DELETE' })).status, 200)
    t.same(await sweepLater(), { deleted: 0, failed: 0 })
    t.same(await listStored(config), [], 'storage is empty')
    t.same(await state.entries(), [state.done(sessionId)], 'no record, session, claim or cleanup entry left in the state')
    t.equal(await state.held(envKeyName(API_KEY), Date.now()), 0, 'the key\'s ledger holds nothing')
    t.ok(await state.expires(sessionId), 'the session\'s answer expires')
  })
}
