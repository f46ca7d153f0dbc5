/** Issue 20's starvation scenario (overload-fairness.ts) on S3 (radosgw) + Redis. */
import t from 'tap'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { starvationScenario } from './overload.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

t.test('s3+redis: stalled uploads, stopped readers and header tricklers starve no one for a minute', { timeout: 300_000 }, async t => {
  await starvationScenario(t, 's3+redis', { redis, s3 })
})
