/**
 * The minimum transfer rate on request bodies (issue 20): an upload that sent one byte a minute
 * kept its part buffers, and the instance's uploads froze, for 181 s and would have gone on,
 * because only a connection moving no byte at all was cut. Raw sockets against a real listening
 * server on both driver pairs, with small figures (256 KiB per 2 s window): single and chunk
 * uploads trickling one byte a second are cut within the documented bound (2 windows + 2 ticks
 * after falling below the rate) and leave nothing stored; a slow upload above the rate completes.
 */
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import t from 'tap'
import { API_KEY, eventually, startApp, testConfig, within, type DriverPair } from '../../helpers/app.js'
import { sendChunk, startSession } from '../../helpers/chunks.js'
import { connect, readAtRate } from '../../helpers/raw-socket.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { listStored } from '../../helpers/storage.js'
import { bytes } from '../../helpers/streams.js'
import { BOUND_MS, KiB, MIN_BYTES, MiB, SLACK_MS, WINDOW_MS } from './min-rate-figures.js'

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
    const lines: Array<Record<string, unknown>> = []
    const logs = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(JSON.parse(chunk.toString())); done() } })
    const { app, url, config } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings), { loggerInstance: pino({ level: 'warn' }, logs) })
    const took = await trickle(app, url, post('/upload', 16 * MiB) + filePart('file'))
    t.ok(took < BOUND_MS + SLACK_MS, `cut ${took} ms after it fell below the rate (bound ${BOUND_MS} ms)`)
    t.match(lines.find(l => l.msg === 'connection cut: under the minimum transfer rate'), { level: 40, reqId: String, minBytes: MIN_BYTES, windowMs: WINDOW_MS }, 'the log says why')
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

  t.test(`${pair}: a slow upload above the rate completes (min_rate_slow_upload_ok)`, async t => {
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
    t.match(answered.head, /"code":"[A-Za-z0-9]{6}"/)
  })
}
