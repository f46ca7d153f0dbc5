/**
 * Two instances sharing a real 3-master Redis Cluster (started for this file) and one bucket:
 * the download race and the chunked flow hold on the cluster as on one Redis.
 */
import t, { type Test } from 'tap'
import { loadConfig } from '../../../src/config.js'
import { startApp, testEnv, upload } from '../../helpers/app.js'
import { post, sendChunk, startSession } from '../../helpers/chunks.js'
import { startRedisCluster } from '../../helpers/redis-cluster.js'
import { startS3 } from '../../helpers/s3.js'
import { listStored } from '../../helpers/storage.js'
import { bytes, sha256Of } from '../../helpers/streams.js'

const [redisCluster, s3] = await Promise.all([startRedisCluster(), startS3()])
t.teardown(async () => { await redisCluster.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}; Redis Cluster masters ${redisCluster.nodes}`)

async function twoInstances (t: Test, now?: () => number) {
  const env = testEnv(t, 's3+redis', { redisSetup: redisCluster, s3 })
  const overrides = now ? { now } : {}
  const a = await startApp(t, loadConfig(env), overrides)
  const b = await startApp(t, loadConfig(env), overrides)
  return [a, b] as const
}

t.test('200 concurrent downloads across two instances on a Redis Cluster: exactly max_downloads served', async t => {
  const [a, b] = await twoInstances(t)
  // Codes hash to slots on every master: race several files at once, each on its own slot.
  const ups = await Promise.all(Array.from({ length: 3 }, (_, i) => upload(a.url, [['file', { data: `shared-${i}` }], ['max_downloads', String(5 + i)]])))
  t.ok(ups.every(u => u.status === 200))
  const results = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
    const f = i % 3
    const res = await fetch(`${(i % 2 === 0 ? a : b).url}/download/${ups[f]!.body.code}`)
    return { f, status: res.status, body: await res.text() }
  }))
  for (let f = 0; f < 3; f++) {
    const mine = results.filter(r => r.f === f)
    t.equal(mine.filter(r => r.status === 200 && r.body === `shared-${f}`).length, 5 + f, `file ${f}: exactly ${5 + f} served`)
    t.equal(mine.filter(r => r.status === 404).length, mine.length - 5 - f, `file ${f}: the rest 404`)
  }
})

t.test('a chunked session whose chunks alternate between instances, on a Redis Cluster', async t => {
  const [a, b] = await twoInstances(t)
  const [chunkSize, count] = [1024 * 1024, 4]
  const data = bytes(chunkSize * count - 1000)
  const id = await startSession(a.url, [['filename', 'x.bin'], ['total_chunks', String(count)]])
  const sent = await Promise.all(Array.from({ length: count }, (_, i) =>
    sendChunk(i % 2 === 0 ? b.url : a.url, id, i, data.subarray(i * chunkSize, (i + 1) * chunkSize))))
  t.ok(sent.every(r => r.status === 200), 'chunks accepted')
  const verify = await post(a.url, '/upload/verify', [['upload_id', id]])
  t.same(verify.body.missing_chunks, [], 'both instances see every chunk')
  const done = await post(b.url, '/upload/complete', [['upload_id', id]])
  t.equal(done.status, 200)
  const again = await post(a.url, '/upload/complete', [['upload_id', id]])
  t.same([again.status, again.body.code], [200, done.body.code], 'a repeated complete on the other instance answers the same code')
  const res = await fetch(`${a.url}/download/${done.body.code}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), 'exact bytes')
})

t.test('sweepers on both instances lease every cleanup bucket across the masters', async t => {
  let now = Date.now()
  const [a, b] = await twoInstances(t, () => now)
  for (let i = 0; i < 12; i++) await upload(i % 2 === 0 ? a.url : b.url, [['file', { data: `f${i}` }], ['expiry_hours', '1']])
  now += 3_600_000 + a.config.sweeper.graceMs
  const [ra, rb] = await Promise.all([a.app.sweeper.sweepOnce(), b.app.sweeper.sweepOnce()])
  t.equal(ra.deleted + rb.deleted, 12, `instances deleted ${ra.deleted} + ${rb.deleted}`)
  t.equal(ra.failed + rb.failed, 0)
  t.same(await listStored(a.config), [])
})
