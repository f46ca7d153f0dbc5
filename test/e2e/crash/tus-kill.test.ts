/**
 * tus-js-client, unchanged, uploads 1 GiB with `parallelUploads: 4` to two real server processes
 * on S3 (radosgw) + Redis behind a round-robin proxy (each request to the other instance), and
 * one instance is killed with kill -9 midway: the client's retries land on the survivor, which
 * reports what each partial upload holds (HEAD), waits out the dead instance's locks (423 with
 * Retry-After until their lease ends), takes the rest, and completes the final upload. The file
 * downloaded afterwards is byte for byte what was sent.
 */
import { createHash } from 'node:crypto'
import t from 'tap'
import * as tus from 'tus-js-client'
import { API_KEY, testEnv } from '../../helpers/app.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startProxy } from '../../helpers/round-robin-proxy.js'
import { startS3 } from '../../helpers/s3.js'
import { killServer, startServer } from '../../helpers/server-process.js'
import { bytes, sha256Of } from '../../helpers/streams.js'

const MiB = 1024 * 1024
const SIZE = 1024 * MiB

// The partial uploads (1 GiB) and the final file's copy of them share the OSD's memory.
const [redis, s3] = await Promise.all([startRedis(), startS3({ memstoreBytes: 4 * 1024 * MiB })])
t.teardown(async () => { await redis.stop(); await s3.stop() })

t.test('tus-js-client, 1 GiB in 4 parallel uploads across two instances, one killed with kill -9 midway: completed on the survivor, byte for byte', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 }, { CHUNK_LOCK_SECONDS: '3', MAX_FILE_SIZE: String(2 * SIZE) })
  const [a, b] = await Promise.all([startServer(t, env), startServer(t, env)])
  const proxy = await startProxy([a.url, b.url])
  t.teardown(() => proxy.close())
  const data = bytes(SIZE, 26)
  const expected = sha256Of(data)

  let killed = false
  let progressAtKill = 0
  const code = await new Promise<string>((resolve, reject) => {
    const upload = new tus.Upload(data, {
      endpoint: `${proxy.url}/files/`,
      headers: { 'X-Client-Key': API_KEY },
      metadata: { filename: 'artifact.bin' },
      parallelUploads: 4,
      chunkSize: 32 * MiB,
      // Enough to outlast the dead instance's locks (CHUNK_LOCK_SECONDS = 3).
      retryDelays: [200, 500, 1000, 2000, 3000, 4000, 5000, 5000],
      onProgress: (sent, total) => {
        if (killed || sent < total * 0.4) return
        killed = true
        progressAtKill = sent
        // The instance the next request would go to holds requests in flight too: kill it.
        const victim = proxy.peek() === a.url ? a : b
        proxy.markDown(victim.url)
        killServer(victim).catch(reject)
      },
      onSuccess: ({ lastResponse }) => { resolve(lastResponse.getHeader('Dropcode-Code') ?? '') },
      onError: reject
    })
    upload.start()
  })
  t.ok(killed, `an instance was killed at ${Math.round(progressAtKill / MiB)} MiB sent`)
  const patches = proxy.routed.filter(r => r.method === 'PATCH')
  t.ok(new Set(patches.map(p => p.backend)).size === 2, 'appends went to both instances')
  t.ok(patches.length >= SIZE / (32 * MiB), `${patches.length} appends in all`)
  t.match(code, /^[A-Za-z0-9]{6}$/, 'the final upload answered the code')

  const res = await fetch(`${proxy.url}/download/${code}`)
  t.equal(res.status, 200)
  const hash = createHash('sha256')
  let size = 0
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) { hash.update(chunk); size += chunk.length }
  t.equal(size, SIZE)
  t.equal(hash.digest('hex'), expected, 'byte for byte what was sent')
})
