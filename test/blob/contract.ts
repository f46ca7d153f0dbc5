/**
 * The BlobStore contract: every driver runs this suite (fs-store.test.ts, s3-store.test.ts).
 */
import { Readable } from 'node:stream'
import type { Test } from 'tap'
import { BlobNotFoundError, type BlobStore } from '../../src/blob/index.js'
import { newBlobKey } from '../../src/ids.js'
import { byteStream, sha256 } from '../helpers/streams.js'

const MiB = 1024 * 1024

export interface BlobContractOptions {
  /** Bytes of a body that spans several parts/writes for this driver. */
  largeSize: number
  /** Checks that nothing (no object, no unfinished upload, no temp file) is left under `key`. */
  assertNothingLeft (t: Test, key: string): Promise<void>
}

export function blobStoreContract (t: Test, open: (t: Test) => Promise<BlobStore>, opts: BlobContractOptions) {
  for (const [name, size] of [['empty', 0], ['small', 1000], ['large', opts.largeSize]] as const) {
    t.test(`${name} body (${size} bytes) round-trips byte for byte`, async t => {
      const store = await open(t)
      const key = newBlobKey()
      const expected = await sha256(byteStream(size, { seed: size + 1 }))
      t.same(await store.put(key, byteStream(size, { seed: size + 1 })), { size })
      const got = await store.get(key)
      t.equal(got.size, size)
      t.same(await sha256(got.body), expected)
    })
  }

  t.test('a missing object: get rejects with BlobNotFoundError, delete and purge succeed', async t => {
    const store = await open(t)
    const key = newBlobKey()
    await t.rejects(store.get(key), BlobNotFoundError)
    await t.resolves(store.delete(key))
    await t.resolves(store.purge(key))
  })

  t.test('delete removes the object', async t => {
    const store = await open(t)
    const key = newBlobKey()
    await store.put(key, Readable.from([Buffer.from('x')]))
    await store.delete(key)
    await t.rejects(store.get(key), BlobNotFoundError)
    await opts.assertNothingLeft(t, key)
  })

  t.test('a body that fails midway: put rejects with its error and leaves nothing', async t => {
    const store = await open(t)
    const key = newBlobKey()
    await t.rejects(store.put(key, byteStream(opts.largeSize, { failAfter: Math.floor(opts.largeSize / 2) })), { message: 'body failed on purpose' })
    await t.rejects(store.get(key), BlobNotFoundError)
    await opts.assertNothingLeft(t, key)
  })

  t.test('a body that fails at once leaves nothing', async t => {
    const store = await open(t)
    const key = newBlobKey()
    await t.rejects(store.put(key, byteStream(MiB, { failAfter: 0 })), { message: 'body failed on purpose' })
    await opts.assertNothingLeft(t, key)
  })

  t.test('keys that are not service-made ids are refused before any I/O', async t => {
    const store = await open(t)
    for (const bad of ['../etc/passwd', 'ABC', '', `${newBlobKey()}/x`]) {
      await t.rejects(store.get(bad), /invalid object key/)
      await t.rejects(store.delete(bad), /invalid object key/)
    }
  })

  t.test('ping answers on a working store; init is repeatable', async t => {
    const store = await open(t)
    await t.resolves(store.init())
    await t.resolves(store.ping())
  })
}
