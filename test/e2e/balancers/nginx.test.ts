/** The nginx recipe (deploy/nginx.conf) in front of two instances: test/e2e/balancers/recipes.ts. */
import t from 'tap'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { recipeSuite } from './recipes.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

await recipeSuite(t, 'nginx', { redis, s3 })
