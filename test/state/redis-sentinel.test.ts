/**
 * The Redis driver through Sentinel (REDIS_SENTINELS): every contract suite on the master the
 * Sentinel names, then a failover (kill -9 of the primary): the client finds the promoted
 * replica by itself, and what was replicated before is there.
 */
import t from 'tap'
import pino from 'pino'
import { loadConfig } from '../../src/config.js'
import { openState } from '../../src/state/index.js'
import type { StateBackend } from '../../src/state/types.js'
import { freePort } from '../helpers/ports.js'
import { startRedisSentinel } from '../helpers/redis-sentinel.js'
import { stateContracts } from './contract/index.js'
import { claimId, fileRecord } from './contract/files.js'

const sentinel = await startRedisSentinel()
t.teardown(() => sentinel.stop())
let n = 0

async function open (prefix: string): Promise<StateBackend> {
  const config = loadConfig({ ...sentinel.env(), REDIS_PREFIX: prefix })
  if (config.state.driver !== 'redis') throw new Error('not redis')
  return await openState(config.state, { now: Date.now, log: pino({ level: 'silent' }) })
}

stateContracts(t, async t => {
  const state = await open(`contract${n++}:`)
  t.teardown(() => state.close())
  return state
})

t.test('after kill -9 of the primary, the client reaches the promoted replica by itself', async t => {
  const state = await open('failover:')
  t.teardown(() => state.close())
  const now = Date.now()
  const file = fileRecord(now, { maxDownloads: 5 })
  await state.files.create(file, now)
  await state.files.claim(file.code, claimId(), now, now + 1000)
  const primary = await sentinel.node(sentinel.primaryPort)
  t.equal(await primary.call('WAIT', '1', '2000'), 1, 'replicated')
  primary.disconnect()
  await sentinel.killPrimary()
  await t.rejects(state.files.lookup(file.code, now), { code: 'DROPCODE_STATE_UNAVAILABLE' }, 'meanwhile: 503, at once')
  const started = Date.now()
  await sentinel.promoted()
  while (Date.now() - started < 20_000) {
    try { await state.ping(); break } catch { await new Promise(resolve => setTimeout(resolve, 100)) }
  }
  t.comment(`state usable again ${Date.now() - started} ms after the promotion began`)
  t.match(await state.files.lookup(file.code, now), { ok: true, file: { downloads: 1 } }, 'the replicated claim is there')
  t.match(await state.files.claim(file.code, claimId(), now, now + 1000), { ok: true }, 'writes go to the new master')
})

t.test('no Sentinel there: start-up stops with a message naming REDIS_SENTINELS', async t => {
  const config = loadConfig({ REDIS_SENTINELS: `127.0.0.1:${await freePort()}` })
  if (config.state.driver !== 'redis') throw new Error('the settings did not pick the Redis driver')
  const started = Date.now()
  await t.rejects(openState(config.state, { now: Date.now, log: pino({ level: 'silent' }) }),
    { name: 'StartupError', message: /^cannot reach Redis master mymaster of the Sentinels at 127\.0\.0\.1:\d+ \(REDIS_SENTINELS\): / })
  t.ok(Date.now() - started < 10_000, `within ${Date.now() - started} ms`)
})
