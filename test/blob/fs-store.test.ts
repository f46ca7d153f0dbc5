import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { createFsBlobStore } from '../../src/blob/fs-store.js'
import { blobStoreContract } from './contract.js'

const dirs = new Map<string, string>()

blobStoreContract(t, async t => {
  const dir = t.testdir()
  const store = createFsBlobStore({ dir })
  await store.init()
  dirs.set(t.fullname, dir)
  return store
}, {
  largeSize: 3 * 1024 * 1024 + 17,
  async assertNothingLeft (t, key) {
    const dir = dirs.get(t.fullname)!
    const fan = path.join(dir, key.slice(0, 2))
    const left = fs.existsSync(fan) ? fs.readdirSync(fan) : []
    t.same(left, [], 'no file or .part file left')
  }
})

t.test('objects are stored under a two-character fan-out of their key', async t => {
  const dir = t.testdir()
  const store = createFsBlobStore({ dir })
  await store.init()
  const key = 'ab' + '0'.repeat(30)
  await store.put(key, (await import('node:stream')).Readable.from([Buffer.from('hi')]))
  t.equal(fs.readFileSync(path.join(dir, 'ab', key), 'utf8'), 'hi')
})

t.test('ping fails when the directory is gone', async t => {
  const dir = path.join(t.testdir(), 'blobs')
  const store = createFsBlobStore({ dir })
  await store.init()
  fs.rmSync(dir, { recursive: true })
  await t.rejects(store.ping(), { code: 'DROPCODE_STORAGE_UNAVAILABLE' })
})
