import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { createFsBlobStore } from '../../src/blob/fs-store.js'
import { appendContract, blobStoreContract, chunkedContract } from './contract.js'
import { dataDir } from '../helpers/app.js'

const dirs = new Map<string, string>()

const open = async (t: Test) => {
  const dir = dataDir(t)
  const store = createFsBlobStore({ dir })
  await store.init()
  dirs.set(t.fullname, dir)
  return store
}
const options = {
  largeSize: 3 * 1024 * 1024 + 17,
  async assertNothingLeft (t: Test, key: string) {
    const dir = dirs.get(t.fullname)!
    const fan = path.join(dir, key.slice(0, 2))
    const left = fs.existsSync(fan) ? fs.readdirSync(fan) : []
    t.same(left, [], 'no file, .part file or chunk directory left')
  }
}
blobStoreContract(t, open, options)
chunkedContract(t, open, options)
appendContract(t, open, {
  ...options,
  // Another instance: a store of its own over the same directory.
  openAgain: async (t: Test) => createFsBlobStore({ dir: dirs.get(t.fullname)! })
})

t.test('objects are stored under a two-character fan-out of their key', async t => {
  const dir = dataDir(t)
  const store = createFsBlobStore({ dir })
  await store.init()
  const key = 'ab' + '0'.repeat(30)
  await store.put(key, (await import('node:stream')).Readable.from([Buffer.from('hi')]))
  t.equal(fs.readFileSync(path.join(dir, 'ab', key), 'utf8'), 'hi')
})

t.test('ping fails when the directory is gone', async t => {
  const dir = path.join(dataDir(t), 'blobs')
  const store = createFsBlobStore({ dir })
  await store.init()
  fs.rmSync(dir, { recursive: true })
  await t.rejects(store.ping(), { code: 'DROPCODE_STORAGE_UNAVAILABLE' })
})
