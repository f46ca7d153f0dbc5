/**
 * The minimum transfer rate (issue 20): an upload that sent one byte a minute kept its part
 * buffers, and the instance's uploads froze, for 181 s and would have gone on, because only a
 * connection moving no byte at all was cut. Driven with raw sockets against a real listening
 * server on both driver pairs, with small figures (256 KiB per 2 s window): tricklers are cut
 * within the documented bound (2 windows + 2 ticks after falling below the rate) and leave nothing
 * stored; slow transfers above the rate complete.
 */
import net from 'node:net'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { API_KEY, eventually, startApp, testConfig, upload, type DriverPair } from '../helpers/app.js'
import { sendChunk, startSession } from '../helpers/chunks.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { listStored } from '../helpers/storage.js'
import { bytes } from '../helpers/streams.js'

const KiB = 1024
const MiB = 1024 * KiB
const WINDOW_MS = 2000
const MIN_BYTES = 256 * KiB
/** The documented bound: a window that still passed, the failing one, a tick after each (500 ms here). */
const BOUND_MS = 2 * WINDOW_MS + 1000
/** For a loaded machine (2 cores shared with other test runs). */
const SLACK_MS = 4000

/** Larger than what loopback buffers take from a reader that reads little (~4–8 MiB measured). */
const FILE = 24 * MiB

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
const backendsOf = { 'fs+local': {}, 's3+redis': { redis, s3 } } as const

const settings = {
  MIN_TRANSFER_BYTES: String(MIN_BYTES),
  MIN_TRANSFER_WINDOW_SECONDS: String(WINDOW_MS / 1000),
  // 5 MiB parts: the 6 MiB sent before trickling make a real multipart upload on S3.
  S3_PART_SIZE: String(5 * MiB),
  CHUNK_LOCK_SECONDS: '3'
}

/**
 * A raw connection to `url`, and when the server's side of it closes (ms after `since()`): a
 * server that cuts a reader which does not read cannot deliver its FIN, so only the server's
 * side shows the cut at once.
 */
async function connect (app: FastifyInstance, url: string) {
  const { port } = new URL(url)
  let serverClosed!: Promise<number>
  let started = Date.now()
  const accepted = new Promise<void>(resolve => {
    const onConnection = (socket: net.Socket) => {
      if (socket.remotePort !== client.localPort) return
      app.server.off('connection', onConnection)
      serverClosed = new Promise(resolve => socket.once('close', () => resolve(Date.now() - started)))
      resolve()
    }
    app.server.on('connection', onConnection)
  })
  // A read buffer that holds a 50 ms tick of the fastest reader here (2 MiB/s), and little more.
  // (net.Socket passes stream options on to Duplex; @types/node does not list them.)
  const client = new net.Socket({ readableHighWaterMark: 256 * KiB } as net.SocketConstructorOpts)
  client.on('error', () => {})
  await new Promise<void>(resolve => client.connect(Number(port), '127.0.0.1', resolve))
  await accepted
  return {
    client,
    /** Starts the clock for `closed()`. */
    mark: () => { started = Date.now() },
    closed: () => serverClosed
  }
}

/** Reads `client` at `perSecond` bytes a second until it closes; the text of the first bytes and the count. */
function readAtRate (client: net.Socket, perSecond: number): Promise<{ head: string, got: number }> {
  client.pause()
  const started = Date.now()
  let got = 0
  let head = ''
  const tick = setInterval(() => {
    let want = Math.floor(perSecond * (Date.now() - started) / 1000) - got
    while (want > 0) {
      const n = Math.min(want, client.readableLength)
      if (n === 0) { client.read(0); break }
      const chunk = client.read(n) as Buffer
      if (head.length < 2048) head += chunk.toString('latin1', 0, 2048)
      got += chunk.length
      want -= chunk.length
    }
  }, 50)
  return new Promise(resolve => client.once('close', () => { clearInterval(tick); resolve({ head, got }) }))
}

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))])

const filePart = (name: string) => `--b\r\ncontent-disposition: form-data; name="${name}"; filename="f.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`
const field = (name: string, value: string) => `--b\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
const post = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nX-Client-Key: ${API_KEY}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`

/** Sends `head`, 6 MiB at once, then one byte a second; how long after the first trickled byte the server cut it. */
async function trickle (app: FastifyInstance, url: string, head: string): Promise<number> {
  const conn = await connect(app, url)
  conn.client.resume()
  conn.client.write(head)
  await new Promise<void>(resolve => conn.client.write(bytes(6 * MiB), () => resolve()))
  conn.mark()
  const drip = setInterval(() => { if (!conn.client.destroyed) conn.client.write('x') }, 1000)
  try {
    return await within(conn.closed(), BOUND_MS + SLACK_MS + 10_000, 'trickling upload cut')
  } finally {
    clearInterval(drip)
    conn.client.destroy()
  }
}

for (const pair of ['fs+local', 's3+redis'] as DriverPair[]) {
  t.test(`${pair}: an upload sending one byte a second is cut within the bound and leaves nothing stored (min_rate_upload_trickle)`, async t => {
    const { app, url, config } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    const took = await trickle(app, url, post('/upload', 16 * MiB) + filePart('file'))
    t.ok(took < BOUND_MS + SLACK_MS, `cut ${took} ms after it fell below the rate (bound ${BOUND_MS} ms)`)
    await eventually(async () => {
      if (await app.state.cleanup.countDue(Number.MAX_SAFE_INTEGER) !== 0) throw new Error('cleanup index not empty yet')
      const left = await listStored(config)
      if (left.length !== 0) throw new Error(`left: ${left.join(', ')}`)
    }, 15_000)
    t.pass('nothing stored: no object, no multipart upload, no temp file')
  })

  t.test(`${pair}: a chunk upload sending one byte a second is cut the same way; its session goes on (min_rate_chunk_trickle)`, async t => {
    const { app, url, config } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    const id = await startSession(url, [['filename', 'f.bin'], ['total_chunks', '1']])
    const before = await listStored(config)
    const took = await trickle(app, url, post('/upload/chunk', 16 * MiB) + field('upload_id', id) + field('chunk_index', '0') + filePart('chunk'))
    t.ok(took < BOUND_MS + SLACK_MS, `cut ${took} ms after it fell below the rate (bound ${BOUND_MS} ms)`)
    await eventually(async () => {
      const left = await listStored(config)
      if (JSON.stringify(left) !== JSON.stringify(before)) throw new Error(`stored: ${left.join(', ')} (before: ${before.join(', ')})`)
    }, 15_000)
    t.pass('the cut chunk left nothing stored')
    await eventually(async () => {
      const res = await sendChunk(url, id, 0, bytes(64 * KiB))
      if (res.status !== 200) throw new Error(`chunk again: ${res.status}`)
    }, 15_000)
    t.pass('the chunk is accepted again afterwards')
  })

  t.test(`${pair}: a download reader taking a trickle is cut within the bound; its claim stays resumable (min_rate_download_trickle)`, async t => {
    const { app, url } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    const up = await upload(url, [['file', { data: bytes(FILE) }], ['max_downloads', '1']])
    t.equal(up.status, 200)
    const code = up.body.code as string
    const conn = await connect(app, url)
    conn.client.write(`GET /download/${code} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    // Loopback buffers take several MiB at once (the first window passes); then 16 KiB a
    // second, an eighth of the rate.
    const reading = readAtRate(conn.client, 16 * KiB)
    let took: number
    try {
      took = await within(conn.closed(), 30_000, 'trickling download cut')
    } finally {
      conn.client.destroy()
    }
    const { head } = await reading
    t.match(head, /^HTTP\/1\.1 200 /)
    // The server's socket closes ≤ 2 windows + 2 ticks after the buffers fill; they fill at once.
    t.ok(took < BOUND_MS + SLACK_MS, `cut after ${took} ms (bound ${BOUND_MS} ms once the buffers are full)`)
    const etag = /\r\netag: ([^\r]+)/i.exec(head)?.[1]
    t.ok(etag, 'the claim\'s ETag was sent')
    const resumed = await fetch(`${url}/download/${code}`, { headers: { range: 'bytes=100-', 'if-range': etag! } })
    t.equal(resumed.status, 206, 'the cut download resumes with its claim')
    t.equal((await resumed.arrayBuffer()).byteLength, FILE - 100)
  })

  t.test(`${pair}: a slow upload and a slow download above the rate complete (min_rate_slow_ok)`, async t => {
    const { app, url } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    // Upload: 1 MiB at 32 KiB every 100 ms (320 KiB/s, 2.5 times the minimum).
    const size = 1 * MiB
    const tail = '\r\n--b--\r\n'
    const up = await connect(app, url)
    const answer = readAtRate(up.client, 10 * MiB)
    up.client.write(post('/upload', filePart('file').length + size + tail.length) + filePart('file'))
    const data = bytes(size)
    for (let at = 0; at < size; at += 32 * KiB) {
      up.client.write(data.subarray(at, at + 32 * KiB))
      await new Promise(resolve => setTimeout(resolve, 100))
    }
    up.client.write(tail) // not end(): a half-closed request is treated as abandoned
    const answered = await within(answer, 20_000, 'slow upload answered')
    t.match(answered.head, /^HTTP\/1\.1 200 /, 'the slow upload was stored')
    const code = /"code":"([^"]+)"/.exec(answered.head)![1]!
    // Download: larger than the loopback buffers take, read at 2 MiB/s (16 times the minimum):
    // the server waits on the reader for several windows.
    const size2 = FILE / 2
    const big = await upload(url, [['file', { data: bytes(size2) }]])
    t.equal(big.status, 200)
    const down = await connect(app, url)
    down.client.write(`GET /download/${big.body.code as string} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    const started = Date.now()
    const got = await within(readAtRate(down.client, 2 * MiB), 40_000, 'slow download read')
    const took = Date.now() - started
    t.match(got.head, /^HTTP\/1\.1 200 /)
    t.ok(got.got > size2, `read all ${got.got} bytes (headers and ${size2})`)
    t.ok(took > 2 * WINDOW_MS, `over ${took} ms: the rate was checked on the way`)
    t.ok(code.length > 0)
  })
}
