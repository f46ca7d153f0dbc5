/**
 * A claim whose answer was lost must not burn a download (issue 15). The test's own
 * redis-server is paused with SIGSTOP while downloads run against the real server process:
 * claims sent into the paused server's socket time out (503), and Redis runs them when it
 * resumes. Each such claim id is refunded once Redis answers, so in the end every counted
 * download was served and no download was served beyond the limit. The same pause shows that a
 * chunk commit whose answer was lost leaves a usable chunk.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { testEnv, upload } from '../../helpers/app.js'
import { post, sendChunk, startSession } from '../../helpers/chunks.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { logged, startServer } from '../../helpers/server-process.js'
import { slowChunk } from '../../helpers/slow-chunk.js'
import { bytes, sha256Of } from '../../helpers/streams.js'
import { startTcpRelay } from '../../helpers/tcp-relay.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

const LIMIT = 10
const MiB = 1024 * 1024
const data = 'refund me '.repeat(100)

/** A metric's value from the Prometheus text (0 when absent). */
const metric = (text: string, line: string) => Number(text.split('\n').find(l => l.startsWith(line + ' '))?.slice(line.length + 1) ?? 0)

/** A file of LIMIT downloads, and its download count read straight from Redis (not through the service). */
async function uploadCounted (t: Test, serverUrl: string, prefix: string) {
  const up = await upload(serverUrl, [['file', { data, filename: 'r.txt' }], ['max_downloads', String(LIMIT)]])
  const code = up.body.code
  const direct = new Redis(redis.url)
  t.teardown(() => direct.disconnect())
  const counted = async () => Number(await direct.hget(`${prefix}file:{${code}}`, 'downloads'))
  return { code, counted }
}

t.test('Redis paused for 8 s while downloads run: over-served 0, counted-but-never-served 0', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 })
  const server = await startServer(t, env)
  const { code, counted } = await uploadCounted(t, server.url, env.REDIS_PREFIX!)

  const statuses: number[] = []
  let served = 0
  const download = async () => {
    const res = await fetch(`${server.url}/download/${code}`)
    const body = await res.text()
    statuses.push(res.status)
    if (res.status === 200 && body === data) served++
  }

  const start = Date.now()
  const at = (ms: number) => sleep(Math.max(0, start + ms - Date.now()))
  redis.pause()
  t.teardown(() => { try { redis.resume() } catch { /* stopped already */ } })
  // Claims sent at 0 s and 1 s time out after 5 s while Redis sleeps (503) and run at 8 s;
  // those sent at 6 s run at 8 s too, in time for their requests (200).
  const running: Array<Promise<void>> = []
  for (const wave of [0, 1000, 6000]) {
    await at(wave)
    running.push(download(), download())
  }
  await at(8000)
  redis.resume()
  await Promise.all(running)
  t.same(statuses.toSorted(), [200, 200, 503, 503, 503, 503], 'four claims timed out, two were answered after the pause')

  // The refunds went out as the 503s were answered and ran when Redis resumed.
  const deadline = Date.now() + 5000
  while (await counted() !== served && Date.now() < deadline) await sleep(50)
  t.equal(await counted() - served, 0, 'counted but never served: 0')

  // What is left of the limit is still there: exactly LIMIT downloads served in all.
  while (true) {
    const before = statuses.length
    await download()
    if (statuses[before] !== 200) break
  }
  t.equal(statuses.at(-1), 404, 'then the code is exhausted')
  t.equal(served, LIMIT, 'over-served 0, and no download burnt')
  t.equal(await counted(), LIMIT)

  const metrics = await (await fetch(server.metricsUrl!)).text()
  t.equal(metric(metrics, 'dropcode_claim_refunds_total{event="queued"}'), 4)
  t.equal(metric(metrics, 'dropcode_claim_refunds_total{event="refunded"}'), 4)
  t.equal(metric(metrics, 'dropcode_claim_refunds_pending'), 0)
})

t.test('a chunk commit whose answer was lost: the chunk stays usable (its data is not discarded)', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 })
  const server = await startServer(t, env)
  const data = bytes(2 * MiB + 500, 4)
  const id = await startSession(server.url, [['filename', 'late.bin'], ['total_chunks', '3']])
  t.equal((await sendChunk(server.url, id, 0, data.subarray(0, MiB))).status, 200)
  // Chunk 1 is stored; Redis stops before its commit, which times out (503) and runs at resume.
  const late = slowChunk(server.url, id, 1)
  await late.write(data.subarray(MiB, 2 * MiB))
  await late.holdAfterChunk()
  await sleep(1000)
  redis.pause()
  t.teardown(() => { try { redis.resume() } catch { /* stopped already */ } })
  const answered = late.end(sha256Of(data.subarray(MiB, 2 * MiB)))
  await sleep(6000)
  redis.resume()
  t.equal((await answered).status, 503, 'the commit timed out')
  const verify = await post(server.url, '/upload/verify', [['upload_id', id]])
  t.same(verify.body.missing_chunks, [2], 'the late commit recorded chunk 1')
  t.equal((await sendChunk(server.url, id, 2, data.subarray(2 * MiB))).status, 200)
  const done = await post(server.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200, 'the session completes: the recorded chunk\'s data is there')
  const res = await fetch(`${server.url}/download/${done.body.code}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'bytes identical')
})

t.test('the connection to Redis breaks with claims unanswered: they run later, and are refunded once Redis answers again', async t => {
  const relay = await startTcpRelay(redis.port)
  t.teardown(() => relay.close())
  const env = testEnv(t, 's3+redis', { redis, s3 }, { REDIS_URL: `redis://127.0.0.1:${relay.port}`, LOG_LEVEL: 'warn' })
  const server = await startServer(t, env)
  const { code, counted } = await uploadCounted(t, server.url, env.REDIS_PREFIX!)

  // The claims reach the paused server's socket; then the path breaks. Redis runs them when it
  // resumes (their connection is gone by then, so their answers are lost), and the instance's
  // first refund attempts fail: it is reconnecting to a server that does not answer yet.
  redis.pause()
  t.teardown(() => { try { redis.resume() } catch { /* stopped already */ } })
  const downloads = [fetch(`${server.url}/download/${code}`), fetch(`${server.url}/download/${code}`)]
  await sleep(1000)
  relay.cut()
  const statuses = await Promise.all(downloads.map(async d => { const res = await d; await res.arrayBuffer(); return res.status }))
  t.same(statuses, [503, 503], 'both claims failed for their clients')
  await sleep(1000)
  redis.resume()

  const deadline = Date.now() + 10_000
  while (await counted() !== 0 && Date.now() < deadline) await sleep(100)
  t.equal(await counted(), 0, 'counted but never served: 0')
  let served = 0
  while ((await fetch(`${server.url}/download/${code}`).then(async res => { await res.arrayBuffer(); return res.status })) === 200) served++
  t.equal(served, LIMIT, 'the whole limit is still there')
  const metrics = await (await fetch(server.metricsUrl!)).text()
  t.equal(metric(metrics, 'dropcode_claim_refunds_total{event="refunded"}'), 2)
  t.ok(await logged(server, l => l.msg === 'could not refund a download claim yet; retrying'), 'refunds were retried')
})
