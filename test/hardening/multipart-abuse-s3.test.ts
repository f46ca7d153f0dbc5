import t from 'tap'
import { startApp, testConfig } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { multipartAbuseSuite } from './multipart-abuse.js'

// On S3 + Redis, where what a refused upload could leave behind is an unfinished multipart
// upload: storageState (raw.ts, helpers/storage.ts) lists them with the objects.
const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)
multipartAbuseSuite(t, t => startApp(t, testConfig(t, 's3+redis', { redis, s3 })))
