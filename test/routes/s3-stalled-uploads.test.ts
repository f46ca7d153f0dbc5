/**
 * Issue 20, "fair to every client", end to end on S3 + Redis with real sockets: uploads that
 * send a little of their body and stall must cost what they sent, not a part buffer each. With
 * part-sized buffers reserved per upload, 16 such uploads took the whole pool (32 × 8 MiB) and
 * every later upload of the instance waited, silently. Here 40 stall, and 20 ordinary uploads
 * must still be answered at once; once the stalled clients go, nothing of theirs remains.
 * MAX_CONCURRENT_UPLOADS is raised so that the slot limit is not what this measures.
 */
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import assert from 'node:assert/strict'
import { API_KEY, eventually, startApp, testConfig, upload, within } from '../helpers/app.js'
import { startSession } from '../helpers/chunks.js'
import { startRedis } from '../helpers/redis-server.js'
import { testS3Client } from '../helpers/s3-client.js'
import { startS3 } from '../helpers/s3.js'
import { bytes } from '../helpers/streams.js'

const KiB = 1024
const MiB = 1024 * KiB

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)

/** An upload that declares a 10 MiB file, sends its first 64 KiB and then nothing. */
async function stalledUpload (url: string): Promise<net.Socket> {
  const { port } = new URL(url)
  const boundary = 'stalled-upload-boundary'
  const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`)
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  const length = head.length + 10 * MiB + tail.length
  const socket = net.connect(Number(port), '127.0.0.1')
  socket.on('error', () => {})
  await new Promise<void>(resolve => socket.once('connect', resolve))
  socket.write(`POST /upload HTTP/1.1\r\nhost: 127.0.0.1\r\nx-client-key: ${API_KEY}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${length}\r\n\r\n`)
  socket.write(head)
  socket.write(bytes(64 * KiB, 7))
  return socket
}

t.test('40 uploads stalled after 64 KiB do not hold up 20 others; they leave nothing behind', async t => {
  const config = testConfig(t, 's3+redis', { redis, s3 }, { MAX_CONCURRENT_UPLOADS: '1000' })
  const { app, url, metricsUrl } = await startApp(t, config)
  const client = testS3Client(s3)
  t.teardown(() => client.destroy())
  const Bucket = config.storage.driver === 's3' ? config.storage.bucket : ''

  const stalled = await Promise.all(Array.from({ length: 40 }, async () => await stalledUpload(url)))
  t.teardown(() => { for (const s of stalled) s.destroy() })
  await sleep(1000) // the server reads their 64 KiB and starts storing each
  t.ok(stalled.every(s => !s.destroyed && s.readableLength === 0), 'the stalled uploads are open and unanswered')

  const started = Date.now()
  const answers = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    const up = await within(upload(url, [['file', { data: bytes(100 * KiB, 100 + i), filename: `f${i}.bin` }]]), 2000, `upload ${i} beside 40 stalled ones`)
    return { status: up.status, size: up.body.size, code: up.body.code }
  }))
  t.same(answers.map(a => a.status), Array(20).fill(200), `20 uploads answered 200 in ${Date.now() - started} ms`)
  t.same(answers.map(a => a.size), Array(20).fill(100 * KiB))
  t.ok(stalled.every(s => s.readableLength === 0), 'the stalled ones are still unanswered')
  const scrape = await (await fetch(metricsUrl)).text()
  t.equal(scrape.match(/^dropcode_upload_memory_bytes\{state="in_use"\} (\d+)$/m)?.[1], String(40 * 64 * KiB), 'each stalled upload holds one 64 KiB slab of upload memory, nothing more (/metrics)')
  t.equal(scrape.match(/^dropcode_upload_memory_bytes\{state="max"\} (\d+)$/m)?.[1], String(128 * MiB), 'the default S3_UPLOAD_MEMORY')
  t.equal(scrape.match(/^dropcode_upload_memory_waiting\{where="slab"\} (\d+)$/m)?.[1], '0')
  t.equal(scrape.match(/^dropcode_upload_memory_waiting\{where="gate"\} (\d+)$/m)?.[1], '0')

  for (const s of stalled) s.destroy()
  await eventually(async () => {
    const objects = await client.send(new ListObjectsV2Command({ Bucket }))
    assert.equal(objects.KeyCount ?? 0, 20, 'only the 20 finished uploads are objects')
    const unfinished = await client.send(new ListMultipartUploadsCommand({ Bucket }))
    assert.deepEqual(unfinished.Uploads ?? [], [], 'no unfinished multipart upload')
  }, 10_000)
  t.pass('nothing of the stalled uploads remains: 20 objects, no unfinished multipart upload')
  await eventually(async () => { assert.equal(app.blobs.uploadMemory?.().bytesInUse, 0) })
  t.pass('and their slabs are back in the pool')
})

t.test('first chunks of sessions that stall hold their bytes in the part memory, bounded and counted, not outside it', async t => {
  const config = testConfig(t, 's3+redis', { redis, s3 }, { MAX_CONCURRENT_UPLOADS: '1000' })
  const { url, metricsUrl } = await startApp(t, config)
  const { port } = new URL(url)
  const sent = 4 * MiB
  const sockets = await Promise.all(Array.from({ length: 20 }, async () => {
    // A session's first chunk decides its layout; this one declares 6 MiB (so: parts), sends 4 and stalls.
    const id = await startSession(url, [['filename', 'big.bin'], ['total_chunks', '3']])
    const boundary = 'stalled-chunk-boundary'
    const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="upload_id"\r\n\r\n${id}\r\n--${boundary}\r\ncontent-disposition: form-data; name="chunk_index"\r\n\r\n0\r\n` +
      `--${boundary}\r\ncontent-disposition: form-data; name="chunk"; filename="blob"\r\ncontent-type: application/octet-stream\r\n\r\n`)
    const socket = net.connect(Number(port), '127.0.0.1')
    socket.on('error', () => {})
    socket.write(`POST /upload/chunk HTTP/1.1\r\nhost: 127.0.0.1\r\nx-client-key: ${API_KEY}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${head.length + 6 * MiB + 64}\r\n\r\n`)
    socket.write(head)
    socket.write(bytes(sent, 9))
    return socket
  }))
  t.teardown(() => { for (const s of sockets) s.destroy() })
  const inUse = async () => Number((await (await fetch(metricsUrl)).text()).match(/^dropcode_upload_memory_bytes\{state="in_use"\} (\d+)$/m)?.[1])
  await eventually(async () => { assert.ok(await inUse() >= 20 * sent, `in use: ${await inUse()}`) }, 10_000)
  t.pass('all 20 × 4 MiB received are in the part memory')
  for (const s of sockets) s.destroy()
  await eventually(async () => { assert.equal(await inUse(), 0) })
  t.pass('and back in the pool once the clients are gone')
})
