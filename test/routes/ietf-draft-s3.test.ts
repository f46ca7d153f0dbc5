import t from 'tap'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { ietfDraftSuite } from './ietf-draft.js'

// A radosgw start and a dozen upload scenarios on S3: over tap's 180 s on a loaded machine.
t.setTimeout(600_000)
const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)
ietfDraftSuite(t, 's3+redis', { redis, s3 })
