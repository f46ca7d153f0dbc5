import t from 'tap'
import { openLmdbBackend } from '../../src/state/lmdb/index.js'
import { dataDir } from '../helpers/tmp.js'
import { stateContracts } from './contract/index.js'

stateContracts(t, async t => {
  const backend = await openLmdbBackend({ dir: dataDir(t), maxRecords: 1_000_000, now: Date.now, housekeepingMs: 0 })
  t.teardown(() => backend.close())
  return backend
})
