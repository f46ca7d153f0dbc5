/**
 * A crashed instance's chunk locks must not stall the session (issue 15), and two live requests
 * never write the same chunk. Two real server processes share a redis-server and radosgw; the
 * instance receiving a chunk is killed with SIGKILL mid-chunk.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { testEnv } from '../helpers/app.js'
import { post, sendChunk, startSession } from '../helpers/chunks.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { killServer, startServer } from '../helpers/server-process.js'
import { slowChunk } from '../helpers/slow-chunk.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

const MiB = 1024 * 1024

t.test('kill -9 of the instance receiving chunk 3: resending it to the survivor succeeds within CHUNK_LOCK_SECONDS (default 15)', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 })
  const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
  const data = bytes(5 * MiB - 1234)
  const chunk = (i: number) => data.subarray(i * MiB, (i + 1) * MiB)
  const id = await startSession(b.url, [['filename', 'lock.bin'], ['total_chunks', '5']])
  for (const i of [0, 1, 2]) t.equal((await sendChunk(b.url, id, i, chunk(i))).status, 200)

  // Chunk 3 goes to a, which takes its lock and receives part of it, then dies.
  const cut = slowChunk(a.url, id, 3)
  await cut.write(chunk(3).subarray(0, 300_000))
  await sleep(500)
  await killServer(a)
  const killedAt = Date.now()
  await t.rejects(cut.answer, 'the dying instance answers nothing')

  const busy: string[] = []
  let status: number
  while (true) {
    const res = await sendChunk(b.url, id, 3, chunk(3))
    status = res.status
    if (status !== 409 || Date.now() - killedAt > 30_000) break
    busy.push(res.body.code as string)
    await sleep(500)
  }
  const waited = Date.now() - killedAt
  t.equal(status, 200, 'the survivor took the chunk')
  t.ok(busy.length > 0 && busy.every(c => c === 'DROPCODE_SESSION_BUSY'), `the dead holder's lock was live at first (${busy.length} × 409 SESSION_BUSY)`)
  t.ok(waited <= 16_000, `the lock was gone ${waited} ms after the kill (lease 15 s)`)

  t.equal((await sendChunk(b.url, id, 4, chunk(4))).status, 200)
  t.same((await post(b.url, '/upload/verify', [['upload_id', id]])).body.missing_chunks, [])
  const done = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200)
  const res = await fetch(`${b.url}/download/${done.body.code as string}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'bytes identical')
})

t.test('a live upload keeps its lock by heartbeat past the lease: another request for the chunk gets 409 throughout', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 }, { CHUNK_LOCK_SECONDS: '3' })
  const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
  const data = bytes(3 * MiB - 99)
  const chunk = (i: number) => data.subarray(i * MiB, (i + 1) * MiB)
  const id = await startSession(a.url, [['filename', 'live.bin'], ['total_chunks', '3']])
  t.equal((await sendChunk(a.url, id, 0, chunk(0))).status, 200)

  // Chunk 1 streams to a for two leases; meanwhile b is asked for the same index with other bytes.
  const slow = slowChunk(a.url, id, 1)
  const intruder = bytes(MiB, 7)
  const rivals: number[] = []
  const pieces = 20
  for (let p = 0; p < pieces; p++) {
    await slow.write(chunk(1).subarray(p * MiB / pieces, (p + 1) * MiB / pieces))
    await sleep(300)
    if (p % 2 === 1) rivals.push((await sendChunk(b.url, id, 1, intruder)).status)
  }
  const answer = await slow.end()
  t.equal(answer.status, 200, 'the live upload kept its lock for ~6 s with a 3 s lease')
  t.ok(rivals.length >= 8 && rivals.every(s => s === 409), `the rival request was refused each time (${rivals.join(',')})`)

  const verify = await post(b.url, '/upload/verify', [['upload_id', id]])
  t.equal((verify.body.chunks as Array<{ index: number, sha256: string }>)[1]!.sha256, sha256Of(chunk(1)), 'chunk 1 holds the live upload\'s bytes only')
  t.equal((await sendChunk(b.url, id, 2, chunk(2))).status, 200)
  const done = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200)
  const res = await fetch(`${a.url}/download/${done.body.code as string}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'bytes identical')
})
