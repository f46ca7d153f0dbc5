/** Every state contract suite, for a driver's test file to run against its backend. */
import type { Test } from 'tap'
import { cleanupIndexContract } from './cleanup.js'
import { counterStoreContract } from './counters.js'
import { fileStoreContract, type OpenBackend } from './files.js'
import { keyStoreContract } from './keys.js'
import { sessionStoreContract } from './sessions.js'

export function stateContracts (t: Test, open: OpenBackend) {
  t.test('FileStore', async t => fileStoreContract(t, open))
  t.test('CleanupIndex', async t => cleanupIndexContract(t, open))
  t.test('SessionStore', async t => sessionStoreContract(t, open))
  t.test('CounterStore', async t => counterStoreContract(t, open))
  t.test('KeyStore', async t => keyStoreContract(t, open))
}

export type { OpenBackend }
