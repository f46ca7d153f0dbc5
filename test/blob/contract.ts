/**
 * The BlobStore contract: every driver runs this suite (fs-store.test.ts, s3-store.test.ts).
 */
import { Readable } from 'node:stream'
import type { Test } from 'tap'
import { BlobNotFoundError, type BlobStore } from '../../src/blob/index.js'
import { newBlobKey } from '../../src/core/ids.js'
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

/** An in-memory stand-in for the state store's settleLayout (set once, then read). */
export function layoutCell () {
  let layout: string | undefined
  return async (wanted: string | undefined) => {
    if (layout === undefined && wanted !== undefined) layout = wanted
    return layout
  }
}

/**
 * Uploads chunks of the given sizes (in `order`, `parallel` at a time) and completes; returns
 * the assembled object's sha256 and the expected one.
 */
export async function chunkedRoundTrip (store: BlobStore, sizes: number[], opts: { order?: number[], parallel?: boolean } = {}) {
  const key = newBlobKey()
  const handle = await store.beginChunked(key)
  const settleLayout = layoutCell()
  const receipts: Array<Awaited<ReturnType<BlobStore['putChunk']>>> = []
  const order = opts.order ?? sizes.map((_, i) => i)
  const put = async (i: number) => {
    receipts[i] = await store.putChunk(key, handle, { index: i, total: sizes.length, body: byteStream(sizes[i]!, { seed: i + 7 }), settleLayout })
  }
  if (opts.parallel === true) await Promise.all(order.map(put))
  else for (const i of order) await put(i)
  const { size } = await store.completeChunked(key, handle, receipts)
  const got = await store.get(key)
  async function * expected () { for (let i = 0; i < sizes.length; i++) yield * byteStream(sizes[i]!, { seed: i + 7 }) }
  return { key, size, got: await sha256(got.body), want: await sha256(expected()), receipts, handle, settleLayout }
}

/** Opens a chunked upload on `store` and returns a `put(index, body)` bound to it. */
async function openChunked (store: BlobStore, total: number) {
  const key = newBlobKey()
  const handle = await store.beginChunked(key)
  const settleLayout = layoutCell()
  const put = (index: number, body: Readable) => store.putChunk(key, handle, { index, total, body, settleLayout })
  return { key, handle, put }
}

export function chunkedContract (t: Test, open: (t: Test) => Promise<BlobStore>, opts: BlobContractOptions) {
  const cases: Array<[string, number[], { order?: number[], parallel?: boolean }]> = [
    ['small chunks in order', [MiB, MiB, MiB, 123], {}],
    ['small chunks out of order, in parallel', [MiB, MiB, MiB, 77], { order: [3, 1, 0, 2], parallel: true }],
    ['large chunks out of order', [6 * MiB, 6 * MiB, 1000], { order: [1, 2, 0] }],
    ['large chunks, last chunk first', [6 * MiB, 6 * MiB, 3 * MiB], { order: [2, 0, 1] }],
    ['zero-byte last chunk', [6 * MiB, 0], {}],
    ['small chunks with a zero-byte last chunk', [1000, 1000, 0], {}],
    ['one chunk', [3 * MiB], {}],
    ['one empty chunk', [0], {}]
  ]
  for (const [name, sizes, how] of cases) {
    t.test(`chunked: ${name} assemble byte for byte`, async t => {
      const store = await open(t)
      const r = await chunkedRoundTrip(store, sizes, how)
      t.equal(r.size, sizes.reduce((a, b) => a + b, 0))
      t.same(r.got, r.want)
      await store.delete(r.key)
      await opts.assertNothingLeft(t, r.key)
    })
  }

  t.test('chunked: a retried chunk replaces the first attempt', async t => {
    const store = await open(t)
    const { key, handle, put } = await openChunked(store, 2)
    const first = await put(0, byteStream(MiB, { seed: 99 }))
    const retry = await put(0, byteStream(MiB, { seed: 7 }))
    await store.discardChunk(key, handle, first)
    const last = await put(1, byteStream(10, { seed: 8 }))
    await store.completeChunked(key, handle, [retry, last])
    async function * expected () { yield * byteStream(MiB, { seed: 7 }); yield * byteStream(10, { seed: 8 }) }
    t.same(await sha256((await store.get(key)).body), await sha256(expected()))
    await store.delete(key)
    await opts.assertNothingLeft(t, key)
  })

  t.test('chunked: purge of an abandoned session leaves nothing', async t => {
    const store = await open(t)
    const { key, put } = await openChunked(store, 3)
    await put(0, byteStream(MiB))
    await put(2, byteStream(10))
    await store.purge(key)
    await opts.assertNothingLeft(t, key)
  })

  t.test('chunked: a chunk whose body fails is not stored', async t => {
    const store = await open(t)
    const { key, put } = await openChunked(store, 2)
    await t.rejects(put(0, byteStream(8 * MiB, { failAfter: 6 * MiB })), { message: 'body failed on purpose' })
    await store.purge(key)
    await opts.assertNothingLeft(t, key)
  })
}
