import t, { type Test } from 'tap'
import { createRedisClient } from '../../src/state/index.js'
import { createRedisStateStore } from '../../src/state/redis-store.js'
import { startRedis } from '../helpers/redis-server.js'
import { counterContract, sessionContract, stateStoreContract, fileRecord } from './contract.js'

const redis = await startRedis()
t.teardown(() => redis.stop())
let n = 0

async function client (t: Test) {
  const c = createRedisClient(redis.url)
  await c.connect()
  t.teardown(() => c.quit())
  return c
}

stateStoreContract(t, async t => createRedisStateStore({ client: await client(t), prefix: `contract${n++}:` }))
sessionContract(t, async t => createRedisStateStore({ client: await client(t), prefix: `session${n++}:` }))
counterContract(t, async t => createRedisStateStore({ client: await client(t), prefix: `counter${n++}:` }))

t.test('records carry their TTL, set in the same step as the record', async t => {
  const c = await client(t)
  const store = createRedisStateStore({ client: c, prefix: 'ttl:' })
  const file = fileRecord()
  await store.createFile(file, file.expiresAt)
  const pttl = await c.pttl(`ttl:file:${file.code}`)
  t.ok(pttl > 3_500_000 && pttl <= 3_600_000, `pttl ${pttl}`)
})

t.test('keys live under the prefix only', async t => {
  const c = await client(t)
  const store = createRedisStateStore({ client: c, prefix: 'iso:' })
  const file = fileRecord()
  await store.createFile(file, file.expiresAt)
  const keys: string[] = []
  for await (const batch of c.scanStream({ match: '*', count: 1000 })) keys.push(...(batch as string[]))
  const ours = keys.filter(k => k.startsWith('iso:')).sort()
  t.same(ours, ['iso:blobs', `iso:file:${file.code}`])
})

t.test('Redis down: operations fail fast with STATE_UNAVAILABLE and recover', async t => {
  const c = await client(t)
  const store = createRedisStateStore({ client: c, prefix: 'outage:' })
  const file = fileRecord()
  await store.createFile(file, file.expiresAt)
  await redis.stop()
  const started = Date.now()
  await t.rejects(store.claimDownload(file.code, Date.now()), { code: 'DROPCODE_STATE_UNAVAILABLE', statusCode: 503 })
  await t.rejects(store.ping(), { code: 'DROPCODE_STATE_UNAVAILABLE' })
  t.ok(Date.now() - started < 3000, 'failed fast')
  await redis.start()
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    try { await store.ping(); break } catch { await new Promise(resolve => setTimeout(resolve, 100)) }
  }
  await t.resolves(store.ping(), 'reconnected by itself')
  t.equal(await store.createFile(fileRecord(), Date.now() + 1000), true)
})
