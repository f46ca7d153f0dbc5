/**
 * The first configuration an operator writes: nginx as installed, `proxy_pass` and nothing else,
 * so `proxy_buffering on` (nginx reads a whole download ahead of the client) and a 1 MiB body
 * limit. Found: nginx read the whole file at once, the service saw the last byte leave and ended
 * the claim while the client had 24 %; the README's resume recipe then got a fresh counted 200,
 * and a one-time file was lost (404). Downloads now say `X-Accel-Buffering: no`, so even this
 * nginx streams them. Uploads go to an instance directly (this nginx refuses bodies over 1 MiB).
 */
import path from 'node:path'
import t from 'tap'
import { loadConfig } from '../../../src/config.js'
import { testEnv } from '../../helpers/app.js'
import { startNginx } from '../../helpers/balancers.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { startServer } from '../../helpers/server-process.js'
import { dataDir } from '../../helpers/tmp.js'
import { curl, curlUpload, objectGone, oneTimeCutAndResumed, sha256File, uploadAndFindObject, writeFile } from './recipes.js'

const MiB = 1024 * 1024
const STOCK = `events {}
http {
  upstream dropcode {
    server dropcode-1:3000;
    server dropcode-2:3000;
  }
  server {
    listen 80;
    location / {
      proxy_pass http://dropcode;
    }
  }
}
`

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

const env = testEnv(t, 's3+redis', { redis, s3 })
const config = loadConfig(env)
const instances = await Promise.all([startServer(t, env), startServer(t, env)])
const nginx = await startNginx(t, instances.map(s => new URL(s.url).host), { configText: STOCK })

t.test('stock nginx: a one-time download cut at a quarter resumes, counting once, and is not lost', async t => {
  await oneTimeCutAndResumed(t, config, instances[0]!.url, nginx.url)
})

t.test('stock nginx: a whole one-time download through it deletes the file', async t => {
  const file = writeFile(dataDir(t), 'once.bin', 8 * MiB)
  const { result: up, stored } = await uploadAndFindObject(config, () => curlUpload(instances[1]!.url, file, ['max_downloads=1']))
  const out = path.join(dataDir(t), 'out')
  t.equal((await curl(['-fsS', '-o', out, `${nginx.url}/download/${up.code}`])).code, 0)
  t.equal(await sha256File(out), up.sha256)
  await objectGone(t, stored, 3000)
})
