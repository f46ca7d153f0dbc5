/**
 * Several stateless instances behind a load balancer: two apps on real ports sharing one
 * Redis and one bucket. Whatever instance a request lands on, the answer is the same.
 */
import t, { type Test } from 'tap'
import { loadConfig } from '../../../src/config.js'
import { startApp, testEnv, upload } from '../../helpers/app.js'
import { post, sendChunk, startSession } from '../../helpers/chunks.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { listStored } from '../../helpers/storage.js'
import { bytes, sha256Of } from '../../helpers/streams.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

async function twoInstances (t: Test, now?: () => number) {
  const env = testEnv(t, 's3+redis', { redis, s3 })
  const overrides = now ? { now } : {}
  const a = await startApp(t, loadConfig(env), overrides)
  const b = await startApp(t, loadConfig(env), overrides)
  return [a, b] as const
}

t.test('upload on one instance, download and delete on the other', async t => {
  const [a, b] = await twoInstances(t)
  const data = bytes(123_456)
  const up = await upload(a.url, [['file', { data, filename: 'x.bin' }], ['max_downloads', '2']])
  const res = await fetch(`${b.url}/download/${up.body.code}`)
  t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
  t.equal((await fetch(`${b.url}/delete/${up.body.code}`, { method: 'DELETE' })).status, 200)
  t.equal((await fetch(`${a.url}/download/${up.body.code}`)).status, 404)
})

t.test('N concurrent downloads at the limit across instances: exactly N succeed', async t => {
  const [a, b] = await twoInstances(t)
  const up = await upload(a.url, [['file', { data: 'shared' }], ['max_downloads', '10']])
  const results = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
    const res = await fetch(`${(i % 2 === 0 ? a : b).url}/download/${up.body.code}`)
    return { status: res.status, body: await res.text() }
  }))
  t.equal(results.filter(r => r.status === 200 && r.body === 'shared').length, 10)
  t.equal(results.filter(r => r.status === 404).length, 190)
})

t.test('expiry is honoured everywhere; sweepers on both instances share the work', async t => {
  let now = Date.now()
  const [a, b] = await twoInstances(t, () => now)
  const codes = []
  for (let i = 0; i < 12; i++) codes.push((await upload(i % 2 === 0 ? a.url : b.url, [['file', { data: `f${i}` }], ['expiry_hours', '1']])).body.code)
  now += 3_600_000 + a.config.sweeper.graceMs
  for (const code of codes.slice(0, 3)) {
    t.equal((await fetch(`${a.url}/download/${code}`)).status, 404)
    t.equal((await fetch(`${b.url}/download/${code}`)).status, 404)
  }
  const [ra, rb] = await Promise.all([a.app.sweeper.sweepOnce(), b.app.sweeper.sweepOnce()])
  t.equal(ra.deleted + rb.deleted, 12, `instances deleted ${ra.deleted} + ${rb.deleted}`)
  t.equal(ra.failed + rb.failed, 0)
  t.same(await listStored(a.config), [])
})

t.test('a chunked session whose chunks alternate between instances', async t => {
  const [a, b] = await twoInstances(t)
  for (const [name, chunkSize, count] of [['1 MiB chunks', 1024 * 1024, 5], ['6 MiB chunks', 6 * 1024 * 1024, 3]] as const) {
    const data = bytes(chunkSize * count - 1000)
    const id = await startSession(a.url, [['filename', 'x.bin'], ['total_chunks', String(count)]])
    const sent = await Promise.all(Array.from({ length: count }, (_, i) =>
      sendChunk(i % 2 === 0 ? b.url : a.url, id, i, data.subarray(i * chunkSize, (i + 1) * chunkSize))))
    t.ok(sent.every(r => r.status === 200), `${name}: chunks accepted`)
    const verify = await post(b.url, '/upload/verify', [['upload_id', id]])
    t.same(verify.body.missing_chunks, [], `${name}: both instances see every chunk`)
    const done = await post(b.url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 200)
    const res = await fetch(`${a.url}/download/${done.body.code}`)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data), `${name}: exact bytes`)
  }
})
