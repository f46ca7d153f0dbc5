import t from 'tap'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { startS3 } from '../helpers/s3.js'
import { chunkedSuite } from './chunked.js'
import { integritySuite } from './integrity.js'
import { singleFileSuite } from './single-file.js'
import { tusSuite } from './tus.js'

// The route suites of s3-redis.test.ts with the state on a real 3-master Redis Cluster.
// A radosgw start and a dozen upload scenarios on S3: over tap's 180 s on a loaded machine.
t.setTimeout(600_000)
const [redisCluster, s3] = await Promise.all([startRedisCluster(), startS3()])
t.teardown(async () => { await redisCluster.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}; Redis Cluster masters ${redisCluster.nodes}`)
singleFileSuite(t, 's3+redis', { redisSetup: redisCluster, s3 })
chunkedSuite(t, 's3+redis', { redisSetup: redisCluster, s3 })
integritySuite(t, 's3+redis', { redisSetup: redisCluster, s3 })
tusSuite(t, 's3+redis', { redisSetup: redisCluster, s3 })
