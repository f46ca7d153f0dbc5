/**
 * The Redis driver on a real 3-master Redis Cluster (started on loopback for this file): every
 * contract suite, plus what only a cluster can show: each step's keys share one slot, the
 * cleanup buckets spread over every master, readiness asks every master.
 */
import t, { type Test } from 'tap'
import pino from 'pino'
import { loadConfig } from '../../src/config.js'
import { newBlobKey } from '../../src/core/ids.js'
import { startupBanner } from '../../src/server/banner.js'
import { createClusterClient, openState } from '../../src/state/index.js'
import { createRedisBackend } from '../../src/state/redis/index.js'
import { freePort } from '../helpers/ports.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { stateContracts } from './contract/index.js'
import { claimId, fileRecord } from './contract/files.js'
import { keyRecord, secretHash } from './contract/keys.js'

const cluster = await startRedisCluster({ password: 'cluster-secret' })
t.teardown(() => cluster.stop())
let n = 0

async function client (t: Test) {
  const c = createClusterClient({ mode: 'cluster', nodes: cluster.ports.map(port => ({ host: '127.0.0.1', port })), password: cluster.password })
  await c.connect()
  t.teardown(() => c.quit())
  return c
}

stateContracts(t, async t => createRedisBackend({ client: await client(t), prefix: `contract${n++}:` }))

t.test('the keys of one code, one session, one cleanup bucket, the API keys, one ledger share a slot, whatever the prefix', async t => {
  const c = await client(t)
  const p = 'slots:'
  const state = createRedisBackend({ client: c, prefix: p })
  const now = Date.now()
  const file = fileRecord(now)
  await state.files.create(file, now)
  await state.files.claim(file.code, claimId(), now, now + 1000)
  const slot = async (key: string) => Number(await c.cluster('KEYSLOT', key))
  const slots = await Promise.all([`${p}file:{${file.code}}`, `${p}file:{${file.code}}:claims`, `${p}file:{${file.code}}:served`].map(slot))
  t.equal(new Set(slots).size, 1)
  t.equal(slots[0], await slot(file.code), 'the hash tag alone decides: the prefix does not move a key')
  const id = 'S'.repeat(22)
  const session = await Promise.all(['', ':chunks', ':locks'].map(s => slot(`${p}session:{${id}}${s}`)))
  session.push(await slot(`${p}done:{${id}}`))
  t.equal(new Set(session).size, 1)
  const keys = await Promise.all([`${p}keys:{keys}`, `${p}keys:{keys}:hashes`].map(slot))
  t.equal(new Set(keys).size, 1, 'the API keys and their hashes')
  const ledger = await Promise.all(['', ':until', ':meta'].map(s => slot(`${p}usage:{u:alpha}${s}`)))
  t.equal(new Set(ledger).size, 1, 'one key\'s ledger')
  await state.keys.create(keyRecord('alpha', now), now)
  t.equal(await state.keys.rotate('alpha', secretHash(), now + 1000, now) !== null, true, 'the key scripts run on the cluster')
  t.equal((await state.keys.account('alpha', { add: { item: 'u:1', bytes: 1, until: now + 1000 }, quota: 10 }, now)).ok, true)
})

t.test('the 16 cleanup buckets live on every master, and leases and counts see all of them', async t => {
  const c = await client(t)
  const state = createRedisBackend({ client: c, prefix: 'spread:' })
  const now = Date.now()
  const keys = [...'0123456789abcdef'].map(h => h + newBlobKey().slice(1))
  for (const k of keys) await state.cleanup.schedule(k, now - 1, 'f:AbC123')
  const perMaster = await Promise.all(c.nodes('master').map(async node => {
    let found = 0
    for await (const batch of node.scanStream({ match: 'spread:cleanup:*', count: 1000 })) found += (batch as string[]).length
    return found
  }))
  t.equal(perMaster.length, 3)
  t.ok(perMaster.every(k => k > 0), `bucket keys per master: ${perMaster.join(', ')}`)
  t.equal(await state.cleanup.countDue(now), 16)
  t.same((await state.cleanup.lease(now, 100, now + 1000)).map(d => d.blobKey).sort(), keys.sort())
})

t.test('REDIS_CLUSTER_NODES and REDIS_PASSWORD through openState: a working backend; readiness asks every master', async t => {
  const config = loadConfig({ REDIS_CLUSTER_NODES: cluster.nodes, REDIS_PASSWORD: cluster.password, REDIS_PREFIX: 'open:' })
  t.match(config.state, { driver: 'redis', redis: { mode: 'cluster', nodes: cluster.ports.map(port => ({ host: '127.0.0.1', port })) } })
  if (config.state.driver !== 'redis') throw new Error('the settings did not pick the Redis driver')
  const state = await openState(config.state, { now: Date.now, log: pino({ level: 'silent' }) })
  t.teardown(() => state.close())
  await t.resolves(state.ping())
  const now = Date.now()
  const file = fileRecord(now, { maxDownloads: 2 })
  t.equal(await state.files.create(file, now), true)
  t.match(await state.files.claim(file.code, claimId(), now, now + 1000), { ok: true, last: false })
})

t.test('a wrong password or no cluster there: start-up stops with a message naming REDIS_CLUSTER_NODES', async t => {
  const log = pino({ level: 'silent' })
  const wrong = loadConfig({ REDIS_CLUSTER_NODES: cluster.nodes, REDIS_PASSWORD: 'wrong' })
  if (wrong.state.driver !== 'redis') throw new Error('the settings did not pick the Redis driver')
  await t.rejects(openState(wrong.state, { now: Date.now, log }), { name: 'StartupError', message: /^cannot reach Redis Cluster at 127\.0\.0\.1:\d+,.* \(REDIS_CLUSTER_NODES\): / })
  const nobody = loadConfig({ REDIS_CLUSTER_NODES: `127.0.0.1:${await freePort()}` })
  if (nobody.state.driver !== 'redis') throw new Error('the settings did not pick the Redis driver')
  await t.rejects(openState(nobody.state, { now: Date.now, log }), { name: 'StartupError', message: /\(REDIS_CLUSTER_NODES\)/ })
})

t.test('banner and readiness: one master gone → /readyz fails at once (this test ends the cluster)', async t => {
  const config = loadConfig({ REDIS_CLUSTER_NODES: cluster.nodes, REDIS_PASSWORD: cluster.password, API_KEYS: 'k' })
  t.match(startupBanner(config, null), `state:   Redis Cluster at ${cluster.nodes} (keys dropcode:*)`)
  t.notMatch(startupBanner(config, null), cluster.password!, 'no password in the banner')
  if (config.state.driver !== 'redis') throw new Error('the settings did not pick the Redis driver')
  const state = await openState(config.state, { now: Date.now, log: pino({ level: 'silent' }) })
  t.teardown(() => state.close())
  await t.resolves(state.ping())
  await cluster.killNode(cluster.ports[2]!)
  const started = Date.now()
  await t.rejects(state.ping(), { code: 'DROPCODE_STATE_UNAVAILABLE' })
  t.ok(Date.now() - started < 3000, `failed within ${Date.now() - started} ms`)
  // Once the client has dropped the dead master's connection from its pool, readiness still
  // fails: it asks the master of every slot, not whichever connections are left.
  await new Promise(resolve => setTimeout(resolve, 500))
  await t.rejects(state.ping(), { code: 'DROPCODE_STATE_UNAVAILABLE' }, 'still not ready after the pool dropped the dead master')
})
