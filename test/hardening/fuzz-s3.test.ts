import t from 'tap'
import { startApp, testConfig } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { uploadFuzz } from './fuzz.js'

// On S3 + Redis, where what a refused upload could leave behind is an unfinished multipart
// upload (listed by helpers/storage.ts). The random codes never reach a store: fs covers them.
const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)
uploadFuzz(t, t => startApp(t, testConfig(t, 's3+redis', { redis, s3 })), 1000)
