/**
 * A crashed instance's chunk locks must not stall the session (issue 15), and two live requests
 * never write the same chunk. Two real server processes share a redis-server and radosgw; the
 * instance receiving a chunk is killed with SIGKILL mid-chunk, or the one completing a session
 * mid-complete (issue 20). The 409 while the dead lease lasts says how long it has left
 * (Retry-After), and waiting that long is enough.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { testEnv } from '../../helpers/app.js'
import { post, sendChunk, startSession } from '../../helpers/chunks.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { killServer, startServer } from '../../helpers/server-process.js'
import { slowChunk } from '../../helpers/slow-chunk.js'
import { bytes, sha256Of } from '../../helpers/streams.js'
import { startTcpRelay } from '../../helpers/tcp-relay.js'

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

  // Issue 20: the 409 says how long the dead lock has left, and that its holder may be dead.
  const refused = await sendChunk(b.url, id, 3, chunk(3))
  t.equal(refused.status, 409, 'the dead holder\'s lock is live at first')
  t.equal(refused.body.code, 'DROPCODE_SESSION_BUSY')
  t.match(refused.body.error, /Chunk 3 .*died/, `the message says the holder may have died: ${String(refused.body.error)}`)
  const retryAfter = Number(refused.headers.get('retry-after'))
  const left = 15_000 - (Date.now() - killedAt)
  t.ok(retryAfter >= 1 && retryAfter <= 15 && retryAfter * 1000 >= left - 5_500, `Retry-After ${String(refused.headers.get('retry-after'))} s is the lease left (renewed every 5 s; ≤ ${left} ms after the kill)`)
  t.equal(refused.body.retry_after, retryAfter, 'and the JSON says it too')

  await sleep(retryAfter * 1000 + 300)
  t.equal((await sendChunk(b.url, id, 3, chunk(3))).status, 200, `the survivor took the chunk once Retry-After (${retryAfter} s) had passed`)
  const waited = Date.now() - killedAt
  t.ok(waited <= 17_000, `the lock was gone ${waited} ms after the kill (lease 15 s)`)

  t.equal((await sendChunk(b.url, id, 4, chunk(4))).status, 200)
  t.same((await post(b.url, '/upload/verify', [['upload_id', id]])).body.missing_chunks, [])
  const done = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200)
  const res = await fetch(`${b.url}/download/${done.body.code}`)
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
  const res = await fetch(`${a.url}/download/${done.body.code}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'bytes identical')
})

t.test('kill -9 of the instance completing a session: the other takes over within seconds (not a 15-minute lease), and the session outlives its idle expiry meanwhile', async t => {
  // a's S3 goes through a relay that the test freezes, so its completion hangs midway (as a
  // large assembly would) and it is surely completing when it is killed. Sessions expire after
  // 3 s idle, shorter than the completion takes.
  const relay = await startTcpRelay(Number(new URL(s3.endpoint).port))
  t.teardown(() => relay.close())
  const env = testEnv(t, 's3+redis', { redis, s3 }, { SESSION_TTL_SECONDS: '3', CHUNK_LOCK_SECONDS: '4' })
  const [a, b] = await Promise.all([startServer(t, { ...env, S3_ENDPOINT: s3.endpoint.replace(/:\d+$/, `:${relay.port}`) }), startServer(t, env)])
  const data = bytes(3 * MiB - 777, 5)
  const chunk = (i: number) => data.subarray(i * MiB, (i + 1) * MiB)
  const id = await startSession(b.url, [['filename', 'done.bin'], ['total_chunks', '3'], ['sha256', sha256Of(data)]])
  for (const i of [0, 1, 2]) t.equal((await sendChunk(b.url, id, i, chunk(i))).status, 200)

  relay.freeze()
  const hung = post(a.url, '/upload/complete', [['upload_id', id]])
  hung.catch(() => {})
  await sleep(5_000) // past the session's idle expiry and a first lease: a keeps both alive
  const meanwhile = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(meanwhile.status, 409, 'a live completer keeps its lease past its first term')
  t.ok(Number(meanwhile.headers.get('retry-after')) <= 4, `Retry-After ${String(meanwhile.headers.get('retry-after'))} s: a lease, not 15 minutes`)
  await killServer(a)
  const killedAt = Date.now()

  const refused = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(refused.status, 409, 'the dead completer\'s lease is live at first (the session did not vanish: not 404)')
  t.match(refused.body.error, /died/, String(refused.body.error))
  const retryAfter = Number(refused.headers.get('retry-after'))
  t.ok(retryAfter >= 1 && retryAfter <= 4, `Retry-After ${String(refused.headers.get('retry-after'))} s is the lease left (CHUNK_LOCK_SECONDS=4)`)
  await sleep(retryAfter * 1000 + 300)
  const done = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200, `b completed the session ${Date.now() - killedAt} ms after a died`)
  t.equal(done.body.sha256, sha256Of(data))
  const res = await fetch(`${b.url}/download/${done.body.code}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'bytes identical')
})
