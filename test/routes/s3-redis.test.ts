import t from 'tap'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { chunkedSuite } from './chunked.js'
import { integritySuite } from './integrity.js'
import { keysSuite } from './keys.js'
import { singleFileSuite } from './single-file.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)
singleFileSuite(t, 's3+redis', { redis, s3 })
chunkedSuite(t, 's3+redis', { redis, s3 })
keysSuite(t, 's3+redis', { redis, s3 })
integritySuite(t, 's3+redis', { redis, s3 })
