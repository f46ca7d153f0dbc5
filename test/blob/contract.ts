/**
 * The BlobStore contract: every driver runs this suite (fs-store.test.ts, s3-store.test.ts).
 */
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import type { Test } from 'tap'
import { BlobNotFoundError, type BlobStore, type ChunkReceipt } from '../../src/blob/index.js'
import { newBlobKey } from '../../src/core/ids.js'
import { byteStream, bytes, sha256 } from '../helpers/streams.js'

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

/**
 * An append's body: `size` bytes in 64 KiB buffers, each stamped with its index so that bytes
 * moved within an append show (byteStream repeats one buffer); fails after `failAfter` bytes
 * (a multiple of 64 KiB: exactly that many are delivered).
 */
function appendBody (size: number, seed: number, failAfter?: number): Readable {
  const base = bytes(64 * 1024, seed)
  let sent = 0
  let index = 0
  return new Readable({
    read () {
      if (failAfter !== undefined && sent >= failAfter) { this.destroy(new Error('body failed on purpose')); return }
      if (sent >= size) { this.push(null); return }
      const n = Math.min(base.length, size - sent)
      const chunk = Buffer.from(base.subarray(0, n))
      if (n >= 4) chunk.writeUInt32BE(index++)
      sent += n
      this.push(chunk)
    }
  })
}

/** The first `size` bytes an appendBody of `seed` delivers. */
function * chunksOf (size: number, seed: number): Generator<Buffer> {
  const base = bytes(64 * 1024, seed)
  for (let at = 0, index = 0; at < size; at += base.length) {
    const n = Math.min(base.length, size - at)
    const chunk = Buffer.from(base.subarray(0, n))
    if (n >= 4) chunk.writeUInt32BE(index++)
    yield chunk
  }
}

/** One append as the tests describe it: `size` bytes of `seed`, failing after `failAfter` if set. */
interface AppendStep { size: number, seed: number, failAfter?: number }

/**
 * An appendable upload driven like the tus service drives it: each append's offset and previous
 * receipt (through JSON, as the service stores it), what `observe` saw checked against what the
 * receipt says was stored.
 */
async function openAppendable (t: Test, store: BlobStore) {
  const key = newBlobKey()
  const handle = await store.beginChunked(key, { append: true })
  const receipts: ChunkReceipt[] = []
  /** The upload's expected bytes, by recorded append. */
  const expected: Array<[size: number, seed: number]> = []
  const offset = () => receipts.reduce((n, r) => n + r.size, 0)
  return {
    key,
    handle,
    receipts,
    /** Appends `step` through `on` (default: the store); records its receipt unless `record` is false. */
    async append (step: AppendStep, opts: { on?: BlobStore, record?: boolean } = {}) {
      const seen = createHash('sha256')
      let seenBytes = 0
      const body = appendBody(step.size, step.seed, step.failAfter)
      const previous = receipts.length === 0 ? undefined : JSON.parse(JSON.stringify(receipts.at(-1))) as ChunkReceipt
      const r = await (opts.on ?? store).appendChunk(key, handle, {
        body,
        offset: offset(),
        previous,
        maxLength: step.size,
        observe: data => { seen.update(data); seenBytes += data.length }
      })
      const stored = Math.min(step.size, step.failAfter ?? Infinity)
      t.equal(r.receipt.size, stored, `append of ${step.size} bytes${step.failAfter !== undefined ? ` failing after ${step.failAfter}` : ''}: the receipt covers ${stored} bytes`)
      t.equal(seenBytes, r.receipt.size, 'observe saw exactly the bytes the receipt covers')
      t.equal(seen.digest('hex'), (await sha256(Readable.from(chunksOf(stored, step.seed)))).hash, 'observe saw those bytes, in order')
      if (step.failAfter !== undefined) t.match(r.cut, { message: 'body failed on purpose' }, 'the body\'s error is the cut')
      else t.equal(r.cut, undefined, 'no cut')
      if (opts.record !== false) {
        receipts.push(r.receipt)
        expected.push([stored, step.seed])
      }
      return r.receipt
    },
    /** Completes through `on` (default: the store) and checks the object byte for byte. */
    async complete (on: BlobStore = store) {
      const total = offset()
      const done = await on.completeChunked(key, handle, receipts)
      t.equal(done.size, total, `completed: ${total} bytes`)
      const got = await on.get(key)
      t.equal(got.size, total)
      async function * want () { for (const [size, seed] of expected) yield * chunksOf(size, seed) }
      t.same(await sha256(got.body), await sha256(want()), 'the object is the appends, byte for byte')
    }
  }
}

export interface AppendContractOptions extends BlobContractOptions {
  /** Another store over the same storage (its own client), as another instance would open it. */
  openAgain (t: Test): Promise<BlobStore>
}

export function appendContract (t: Test, open: (t: Test) => Promise<BlobStore>, opts: AppendContractOptions) {
  const cases: Array<[string, number[]]> = [
    ['no append at all', []],
    ['one empty append', [0]],
    ['one byte', [1]],
    ['empty appends around a byte', [0, 1, 0]],
    ['1 MiB × 12 (accumulating below a part)', Array.from({ length: 12 }, () => MiB)],
    ['one append of 13 MiB (over two parts)', [13 * MiB]],
    ['mixed: 3 MiB, 7 MiB, 0, 2 MiB, 6 MiB', [3 * MiB, 7 * MiB, 0, 2 * MiB, 6 * MiB]],
    ['odd sizes: 5 MiB − 1, 1, 5 MiB + 1, 100', [5 * MiB - 1, 1, 5 * MiB + 1, 100]]
  ]
  for (const [name, sizes] of cases) {
    t.test(`append: ${name} round-trips byte for byte, and leaves nothing else`, async t => {
      const store = await open(t)
      const up = await openAppendable(t, store)
      for (const [i, size] of sizes.entries()) await up.append({ size, seed: i + 11 })
      await up.complete()
      await store.delete(up.key)
      await opts.assertNothingLeft(t, up.key)
    })
  }

  for (const cutAt of [0, 3 * MiB, 7 * MiB]) {
    t.test(`append: a body that fails after ${cutAt} bytes keeps them all; another instance continues`, async t => {
      const store = await open(t)
      const up = await openAppendable(t, store)
      await up.append({ size: 2 * MiB + 17, seed: 1 })
      await up.append({ size: cutAt + MiB, seed: 2, failAfter: cutAt })
      // A new store with a client of its own: nothing of the earlier appends lives in memory.
      const other = await opts.openAgain(t)
      await up.append({ size: 2 * MiB + 5, seed: 3 }, { on: other })
      await up.complete(other)
      await other.delete(up.key)
      await opts.assertNothingLeft(t, up.key)
    })
  }

  t.test('append: discarding the last receipt leaves the previous one valid', async t => {
    const store = await open(t)
    for (const [first, discarded, instead] of [[3 * MiB, 4 * MiB, MiB], [6 * MiB, MiB, 2 * MiB], [3 * MiB, 0, 3 * MiB], [MiB, 12 * MiB, 6 * MiB]] as const) {
      const up = await openAppendable(t, store)
      await up.append({ size: first, seed: 1 })
      const unrecorded = await up.append({ size: discarded, seed: 2 }, { record: false })
      await store.discardChunk(up.key, up.handle, unrecorded)
      await up.append({ size: instead, seed: 3 })
      await up.complete()
      await store.delete(up.key)
      await opts.assertNothingLeft(t, up.key)
    }
  })

  t.test('append: purge of an unfinished appendable upload leaves nothing', async t => {
    const store = await open(t)
    const up = await openAppendable(t, store)
    // Tails (1 MiB, then 3 MiB), a part (9 MiB), a tail again; an unrecorded append on top.
    for (const [i, size] of [MiB, 2 * MiB, 6 * MiB, MiB].entries()) await up.append({ size, seed: i })
    await up.append({ size: 2 * MiB, seed: 9 }, { record: false })
    await store.purge(up.key)
    await opts.assertNothingLeft(t, up.key)
  })

  // tus concatenation: a final upload's object from its partial uploads' (sources stay).
  for (const [name, sizes] of [['small sources, an empty one among them', [1000, 0, 70_000, 5]], ['sources of a part\'s size and more', [6 * MiB, 5 * MiB, 1]]] as const) {
    t.test(`concatenate: ${name}: the object is the sources in order, whole and by ranges across them; the sources stay; delete leaves nothing`, async t => {
      const store = await open(t)
      const sources = sizes.map(size => ({ key: newBlobKey(), size }))
      const data = sizes.map((size, i) => bytes(size, i + 40))
      for (const [i, source] of sources.entries()) await store.put(source.key, Readable.from([data[i]!]))
      const whole = Buffer.concat(data)
      const key = newBlobKey()
      const handle = await store.beginChunked(key)
      const built = await store.concatenate(key, handle, sources)
      t.equal(built.size, whole.length)
      if (built.sha256 !== undefined) t.equal(built.sha256, createHash('sha256').update(whole).digest('hex'), 'a digest, when given, is of the bytes')
      const got = await store.get(key)
      t.equal(got.size, whole.length)
      t.same((await sha256(got.body)).hash, createHash('sha256').update(whole).digest('hex'), 'byte for byte')
      const first = sizes[0]!
      for (const range of [{ start: 0, end: 0 }, { start: first - 3, end: first + 9 }, { start: 2, end: whole.length - 1 }, { start: whole.length - 1, end: whole.length - 1 }]) {
        const part = await store.get(key, range)
        t.same((await sha256(part.body)).hash, createHash('sha256').update(whole.subarray(range.start, range.end + 1)).digest('hex'), `bytes ${range.start}-${range.end}`)
      }
      const early = await store.get(key)
      early.body.destroy() // a reader that goes at once leaves nothing open
      for (const [i, source] of sources.entries()) t.same((await sha256((await store.get(source.key)).body)).hash, createHash('sha256').update(data[i]!).digest('hex'), `source ${i} stays`)
      await store.delete(key)
      await t.rejects(store.get(key), BlobNotFoundError)
      await opts.assertNothingLeft(t, key)
      for (const source of sources) await store.delete(source.key)
    })
  }

  t.test('append: purge right after opening leaves nothing', async t => {
    const store = await open(t)
    const up = await openAppendable(t, store)
    await store.purge(up.key)
    await opts.assertNothingLeft(t, up.key)
  })
}
