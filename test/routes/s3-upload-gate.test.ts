/**
 * The gate in front of upload bodies (src/blob/s3/parts.ts), end to end on S3 + Redis with real
 * sockets. Two stalled uploads fill the slab pool with half-built parts (the smallest pool: two
 * 8 MiB parts); later uploads must then wait at the gate with their bodies unread, never blocked
 * inside the pool with a pipeline full of buffered chunks; a waiter whose client goes away leaves
 * the queue; the stall guard's minimum rate cuts the stalled clients but not the waiters (their
 * unread bytes are buffered: the server is behind, not them); then every waiter is answered 200.
 */
import assert from 'node:assert/strict'
import net from 'node:net'
import t from 'tap'
import { API_KEY, eventually, form, startApp, testConfig } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { bytes } from '../helpers/streams.js'

const KiB = 1024
const MiB = 1024 * KiB

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)

/** An upload that declares a `size` file (10 MiB), sends `sent` bytes of it and then nothing. */
async function stalledUpload (url: string, sent: number, size = 10 * MiB): Promise<net.Socket> {
  const { port } = new URL(url)
  const boundary = 'stalled-upload-boundary'
  const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`)
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  const socket = net.connect(Number(port), '127.0.0.1')
  socket.on('error', () => {})
  await new Promise<void>(resolve => socket.once('connect', resolve))
  socket.write(`POST /upload HTTP/1.1\r\nhost: 127.0.0.1\r\nx-client-key: ${API_KEY}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${head.length + size + tail.length}\r\n\r\n`)
  socket.write(head)
  socket.write(bytes(sent, 7))
  return socket
}

t.test('uploads wait at the gate with their bodies unread while stalled ones fill the pool; the stall guard spares them; all end 200', async t => {
  const config = testConfig(t, 's3+redis', { redis, s3 }, {
    MAX_CONCURRENT_UPLOADS: '1000',
    S3_UPLOAD_MEMORY: String(16 * MiB), // two 8 MiB parts: 256 slabs
    MIN_TRANSFER_BYTES: String(64 * KiB),
    MIN_TRANSFER_WINDOW_SECONDS: '3'
  })
  const { app, url } = await startApp(t, config)
  const memory = () => app.blobs.uploadMemory!()

  // Each stalled upload fills 127 slabs of its first part and stops: 254 of 256 in use, and
  // each needs 2 more (the rest of its part, one byte of the next) before it can send.
  const stalled = [await stalledUpload(url, 8 * MiB - 64 * KiB - 1000), await stalledUpload(url, 8 * MiB - 64 * KiB - 1000)]
  t.teardown(() => { for (const s of stalled) s.destroy() })
  await eventually(async () => { assert.equal(memory().bytesInUse, 254 * 64 * KiB) }, 5000)
  t.pass('the stalled uploads hold 254 of the 256 slabs')

  const files = Array.from({ length: 4 }, (_, i) => bytes(MiB, 50 + i))
  let maxWaiting = 0
  const watch = setInterval(() => { maxWaiting = Math.max(maxWaiting, memory().streamsWaiting) }, 5)
  t.teardown(() => clearInterval(watch))
  const post = async (data: Uint8Array) => {
    const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: form([['file', { data, filename: 'f.bin' }]]) })
    return { status: res.status, body: await res.json() as Record<string, unknown> }
  }
  // A client that will leave while it waits. It sent too little for Node to stop reading its
  // socket, so its going is seen at once (one that filled its request's buffer is seen when the
  // stall guard cuts it or when it is admitted and its body fails: it holds one read meanwhile).
  const leaving = await stalledUpload(url, 100, MiB)
  await eventually(async () => { assert.equal(memory().uploadsAtGate, 1) }, 5000)
  const queued = Date.now()
  const answers = Promise.all(files.map(async data => await post(data)))
  await eventually(async () => { assert.equal(memory().uploadsAtGate, 5) }, 5000)
  t.pass('five uploads wait at the gate')
  leaving.destroy()
  await eventually(async () => { assert.equal(memory().uploadsAtGate, 4) }, 5000)
  t.pass('and its request left the queue')
  t.equal(memory().streamsWaiting, 0, 'no upload waits inside the pool, with a body pipeline full of chunks')
  t.equal(memory().bytesInUse, 254 * 64 * KiB, 'nothing was read from the waiting bodies into the pool')

  // The minimum rate cuts the stalled clients (64 KiB per 3 s: at their second window, the
  // first saw their 8 MiB); the waiters owe nothing meanwhile, though they wait over a window.
  const got = await answers
  t.ok(Date.now() - queued > 3000, `the waiters waited longer than one window of the minimum rate (${Date.now() - queued} ms)`)
  t.same(got.map(a => a.status), [200, 200, 200, 200], 'every waiting upload is answered 200 once the stalled ones are cut')
  t.same(got.map(a => a.body.size), Array(4).fill(MiB))
  t.ok(stalled.every(s => s.destroyed || s.readableEnded || s.readableLength === 0), 'the stalled clients were cut or left unanswered')
  // (That five waited at the gate is asserted above, where it happens: a 5 ms sample of it
  // missed the moment once on a loaded CI machine, seeing 4.)
  t.equal(maxWaiting, 0, 'at no point did an upload wait for a slab')
  await eventually(async () => { assert.deepEqual({ inUse: memory().bytesInUse, promised: memory().bytesPromised, gate: memory().uploadsAtGate }, { inUse: 0, promised: 0, gate: 0 }) }, 10_000)
  t.pass('every slab and promise is back')
})
