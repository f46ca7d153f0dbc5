import t, { type Test } from 'tap'
import { createRedisClient } from '../../src/state/index.js'
import { createRedisBackend } from '../../src/state/redis/index.js'
import { startRedis } from '../helpers/redis-server.js'
import { stateContracts } from './contract/index.js'
import { fileRecord } from './contract/files.js'
import { keyRecord, secretHash } from './contract/keys.js'

const redis = await startRedis()
t.teardown(() => redis.stop())
let n = 0

async function client (t: Test) {
  const c = createRedisClient(redis.url)
  await c.connect()
  t.teardown(() => c.quit())
  return c
}

stateContracts(t, async t => createRedisBackend({ client: await client(t), prefix: `contract${n++}:` }))

t.test('records carry their TTL (their retention), set in the same step as the record', async t => {
  const c = await client(t)
  const { files } = createRedisBackend({ client: c, prefix: 'ttl:' })
  const now = Date.now()
  const file = fileRecord(now)
  await files.create(file, now)
  const pttl = await c.pttl(`ttl:file:{${file.code}}`)
  t.ok(pttl > file.retainUntil - Date.now() - 1000 && pttl <= file.retainUntil - now, `pttl ${pttl}`)
})

t.test('keys live under the prefix, each script\'s keys under one hash tag', async t => {
  const c = await client(t)
  const state = createRedisBackend({ client: c, prefix: 'iso:' })
  const now = Date.now()
  const file = fileRecord(now)
  await state.files.create(file, now)
  await state.files.claim(file.code, 'claim-1', now, now + 1000)
  await state.cleanup.schedule(file.blobKey, now, `f:${file.code}`)
  const keys: string[] = []
  for await (const batch of c.scanStream({ match: 'iso:*', count: 1000 })) keys.push(...(batch as string[]))
  t.same(keys.sort(), [`iso:cleanup:{c${file.blobKey[0]!}}`, `iso:cleanup:{c${file.blobKey[0]!}}:owners`, `iso:file:{${file.code}}`, `iso:file:{${file.code}}:claims`, `iso:file:{${file.code}}:served`].sort())
})

t.test('API keys and ledgers live under the prefix, one hash tag per script; a ledger expires with its last item', async t => {
  const c = await client(t)
  const state = createRedisBackend({ client: c, prefix: 'kiso:' })
  const now = Date.now()
  await state.keys.create(keyRecord('alpha', now), now)
  await state.keys.rotate('alpha', secretHash(), now + 1000, now)
  await state.keys.account('alpha', { add: { item: 'u:1', bytes: 10, until: now + 5000 }, quota: 100 }, now)
  await state.keys.account('alpha', { add: { item: 'f:A', bytes: 10, until: now + 9000 } }, now)
  const keys: string[] = []
  for await (const batch of c.scanStream({ match: 'kiso:*', count: 1000 })) keys.push(...(batch as string[]))
  t.same(keys.sort(), ['kiso:keys:{keys}', 'kiso:keys:{keys}:hashes', 'kiso:usage:{u:alpha}', 'kiso:usage:{u:alpha}:meta', 'kiso:usage:{u:alpha}:until'])
  for (const key of ['kiso:usage:{u:alpha}', 'kiso:usage:{u:alpha}:until']) {
    const pttl = await c.pttl(key)
    t.ok(pttl > 9000 - (Date.now() - now) - 1000 && pttl <= 9000, `${key}: pttl ${pttl} (the latest item's end)`)
  }
  t.equal(await c.pttl('kiso:usage:{u:alpha}:meta'), -1, 'lastUsedAt outlives the items')
  await c.del('kiso:usage:{u:alpha}', 'kiso:usage:{u:alpha}:until') // as their TTL would
  t.same(await state.keys.usage('alpha', now), { bytes: 0, lastUsedAt: now }, 'expired items count nothing')
  t.same(await state.keys.account('alpha', { add: { item: 'f:B', bytes: 1, until: now + 9000 } }, now), { ok: true, added: 1, used: 1 })
})

t.test('Redis down: operations fail fast with STATE_UNAVAILABLE and recover', async t => {
  const c = await client(t)
  const state = createRedisBackend({ client: c, prefix: 'outage:' })
  const now = Date.now()
  const file = fileRecord(now)
  await state.files.create(file, now)
  await redis.stop()
  const started = Date.now()
  await t.rejects(state.files.claim(file.code, 'x', now, now + 1), { code: 'DROPCODE_STATE_UNAVAILABLE', statusCode: 503 })
  await t.rejects(state.ping(), { code: 'DROPCODE_STATE_UNAVAILABLE' })
  t.ok(Date.now() - started < 3000, 'failed fast')
  await redis.start()
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    try { await state.ping(); break } catch { await new Promise(resolve => setTimeout(resolve, 100)) }
  }
  await t.resolves(state.ping(), 'reconnected by itself')
  t.equal(await state.files.create(fileRecord(Date.now()), Date.now()), true)
})

t.test('a create that runs after its publish was retracted takes nothing (tombstone until the given time)', async t => {
  const backend = createRedisBackend({ client: await client(t), prefix: `retract${n++}:` })
  const now = Date.now()
  const file = fileRecord(now)
  await backend.files.retract(file.code, file.blobKey, file.retainUntil, now)
  t.equal(await backend.files.create(file, now), false, 'the late create collides with the tombstone')
  t.same(await backend.files.lookup(file.code, now), { ok: false, reason: 'unknown' }, 'a tombstone reads as unknown')
  t.equal(await backend.files.create(fileRecord(now, { code: file.code }), file.retainUntil), true, 'the code is free again after the tombstone')
})
