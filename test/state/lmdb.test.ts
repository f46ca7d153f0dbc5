import t from 'tap'
import { openLmdbBackend } from '../../src/state/lmdb/index.js'
import { dataDir } from '../helpers/tmp.js'
import { stateContracts } from './contract/index.js'

stateContracts(t, async t => {
  const backend = await openLmdbBackend({ dir: dataDir(t), maxRecords: 1_000_000, now: Date.now, housekeepingMs: 0 })
  t.teardown(() => backend.close())
  return backend
})

t.test('housekeeping drops the ended ledger items of a key that uploads no more', async t => {
  const backend = await openLmdbBackend({ dir: dataDir(t), maxRecords: 1_000_000, now: Date.now, housekeepingMs: 0 })
  t.teardown(() => backend.close())
  const now = Date.now()
  await backend.keys.account('idle', { add: { item: 'f:AAAAAA', bytes: 10, until: now + 1000 } }, now)
  await backend.keys.account('idle', { add: { item: 'f:BBBBBB', bytes: 5, until: now + 5000 } }, now)
  await backend.keys.account('busy', { add: { item: 'f:CCCCCC', bytes: 7, until: now + 1000 } }, now)
  t.equal(await backend.purge(now + 2000), 2, 'two items ended')
  const { env } = backend
  t.same([...env.ledger.getKeys()].map(k => (k as string[]).join(' ')), ['idle f:BBBBBB'], 'the live one stays')
  t.same([...env.ledgerDue.getKeys()].length, 1)
  t.same(await backend.keys.usage('idle', now + 2000), { bytes: 5, lastUsedAt: 0 })
  t.same(await backend.keys.usage('busy', now + 2000), { bytes: 0, lastUsedAt: 0 })
  t.equal(env.ledgerTotals.get('busy'), undefined, 'a key left with nothing leaves no total')
})
