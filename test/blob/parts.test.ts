/**
 * The S3 part writer (src/blob/s3/parts.ts) on its own: pieces reassemble byte for byte, the
 * hold-back rule keeps every final piece ≥ holdBack, any number of concurrent streams never use
 * more slabs than the pool holds, a stream holds only the slabs its buffered bytes fill, and the
 * banker's rule lets every stream finish however small the pool (issue 20). Sending is a
 * function here (the S3 side is covered by s3-store.test.ts against a real S3).
 */
import { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { SLAB_SIZE, SlabPool, streamParts, type StreamPartsOptions } from '../../src/blob/s3/parts.js'
import { within } from '../helpers/app.js'
import { bytes } from '../helpers/streams.js'
import { until } from '../helpers/until.js'

/** `data` as a stream of irregular chunks (up to `max` bytes), with a pause now and then. */
function irregular (data: Buffer, seed: number, max = 700): Readable {
  let x = seed
  let at = 0
  return Readable.from((async function * () {
    while (at < data.length) {
      x = (x * 1103515245 + 12345) % 2 ** 31
      const n = 1 + (x % max)
      yield data.subarray(at, at + n)
      at += n
      if (x % 7 === 0) await sleep(x % 3)
    }
  })())
}

async function toBuffer (body: Buffer | Readable): Promise<Buffer> {
  if (Buffer.isBuffer(body)) return Buffer.from(body) // copy: the pool reuses the memory
  const out: Buffer[] = []
  for await (const c of body) out.push(Buffer.from(c as Buffer))
  return Buffer.concat(out)
}

/** Sends `data` through `streamParts`; resolves with the stored bytes, the piece lengths and whether it went whole. */
async function store (pool: SlabPool, source: Readable, opts: Partial<StreamPartsOptions> & { whole?: boolean, delay?: () => number } = {}) {
  const pieces = new Map<number, Buffer>()
  let whole: Buffer | undefined
  const result = await streamParts(source, {
    pool,
    concurrency: opts.concurrency ?? 2,
    holdBack: opts.holdBack ?? 0,
    maxLength: opts.maxLength,
    ticket: opts.ticket,
    sendPart: async (i, body, length) => {
      if (opts.delay !== undefined) await sleep(opts.delay())
      const got = await toBuffer(body)
      if (got.length !== length) throw new Error(`piece ${i}: ${got.length} bytes, said ${length}`)
      pieces.set(i, got)
    },
    ...(opts.whole === true ? { sendWhole: async (body: Buffer | Readable, length: number) => { whole = await toBuffer(body); if (whole.length !== length) throw new Error('whole: wrong length') } } : {})
  })
  const ordered = [...pieces.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1])
  return { result, got: whole ?? Buffer.concat(ordered), lengths: ordered.map(p => p.length), whole: whole !== undefined }
}

t.test('pieces reassemble exactly; with hold-back the final piece is never short', async t => {
  // Slabs of 250 bytes, pieces of 1000 (4 slabs), 16 slabs in all.
  const pool = new SlabPool(1000, 4000, { slabSize: 250 })
  t.teardown(() => pool.close())
  for (const size of [0, 1, 249, 250, 251, 999, 1000, 1001, 1499, 1500, 2999, 3000, 3001, 10_250]) {
    for (const holdBack of [0, 500]) {
      for (const maxLength of [undefined, size, size + 777]) {
        const data = bytes(size, size + 1)
        const { result, got, lengths, whole } = await store(pool, irregular(data, size), { holdBack, maxLength, whole: holdBack === 0 })
        const what = `size ${size}, holdBack ${holdBack}, maxLength ${maxLength}`
        t.equal(Buffer.compare(got, data), 0, `${what}: bytes`)
        t.equal(result.size, size)
        if (holdBack > 0 && lengths.length > 1) t.ok(lengths.at(-1)! >= holdBack, `${what}: last piece ${lengths.at(-1)!}`)
        if (holdBack === 0 && size <= 1000) t.ok(whole, `${what}: one piece is stored whole`)
        t.ok(lengths.slice(0, -1).every(n => n === 1000), `${what}: every piece but the last is a full part`)
      }
    }
  }
  t.equal(pool.stats.bytesInUse, 0, 'every slab came back')
  t.ok(pool.stats.bytesAllocated <= 4000)
})

t.test('a stream holds the slabs its unsent bytes fill, not a part (issue 20)', async t => {
  const pool = new SlabPool(8 * 1024 * 1024, 256 * 1024 * 1024)
  t.teardown(() => pool.close())
  let more: (() => void) | undefined
  const stalled = Readable.from((async function * () {
    yield bytes(SLAB_SIZE, 3) // 64 KiB, then nothing until released
    await new Promise<void>(resolve => { more = resolve })
    yield bytes(100, 4)
  })())
  const storing = store(pool, stalled, { whole: true })
  await until(() => more !== undefined, 2000, 'the first 64 KiB read', 5)
  t.equal(pool.stats.bytesInUse, SLAB_SIZE, 'a stream stalled after 64 KiB holds one slab')
  const others = await Promise.all(Array.from({ length: 40 }, async (_, i) => {
    const second = Readable.from([bytes(3 * SLAB_SIZE + 5, i)])
    const { got } = await store(pool, second, { whole: true })
    return got.length
  }))
  t.same(others, Array(40).fill(3 * SLAB_SIZE + 5), 'other streams go by meanwhile')
  t.equal(pool.stats.bytesInUse, SLAB_SIZE, 'and give their slabs back')
  more!()
  const { got } = await storing
  t.equal(got.length, SLAB_SIZE + 100)
  t.same(pool.stats, { bytesInUse: 0, bytesAllocated: pool.stats.bytesAllocated, bytesMax: 256 * 1024 * 1024, streamsWaiting: 0, uploadsAtGate: 0, bytesPromised: 0 })
})

t.test('many streams through a pool of 8 slabs: all finish, memory never above the pool', async t => {
  // Pieces of 4 slabs; with hold-back 400 a stream may need 4 + 4 slabs before it can send.
  const pool = new SlabPool(400, 800, { slabSize: 100 })
  t.teardown(() => pool.close())
  let peak = 0
  let waitingSeen = 0
  const watch = setInterval(() => { peak = Math.max(peak, pool.stats.bytesInUse); waitingSeen = Math.max(waitingSeen, pool.stats.streamsWaiting) }, 1)
  t.teardown(() => clearInterval(watch))
  const runs = Array.from({ length: 60 }, async (_, s) => {
    const size = [0, 50, 100, 399, 400, 401, 799, 1200, 2050, 4321][s % 10]! + s
    const holdBack = [0, 1, 150, 400][s % 4]!
    const maxLength = s % 3 === 0 ? undefined : s % 3 === 1 ? size : size + 1000
    const data = bytes(size, s)
    const { got, lengths } = await store(pool, irregular(data, s, 250), { holdBack, maxLength, whole: s % 2 === 0, concurrency: 1 + (s % 3), delay: () => (s * 7) % 5 })
    peak = Math.max(peak, pool.stats.bytesInUse)
    if (Buffer.compare(got, data) !== 0) throw new Error(`stream ${s}: bytes differ`)
    if (holdBack > 0 && lengths.length > 1 && lengths.at(-1)! < holdBack) throw new Error(`stream ${s}: short last piece`)
    return s
  })
  const done = await within(Promise.all(runs), 30_000, 'every stream finishes')
  t.equal(done.length, 60, 'every stream finished with its bytes intact')
  t.ok(peak <= 800, `at most 8 slabs in use (peak ${peak / 100})`)
  t.ok(waitingSeen > 0, `streams had to wait (up to ${waitingSeen} at once): the pool was the limit`)
  t.equal(pool.stats.bytesInUse, 0, 'every slab came back')
  t.ok(pool.stats.bytesAllocated <= 800)
})

t.test('one stream stalls holding slabs; the others still complete', async t => {
  // 16 slabs, pieces of 4. The stalled stream holds 3 and needs 2 more (the rest of its piece and
  // one of the next): the banker's rule keeps those 2 for it, which leaves 11 to the others. Four
  // at a time, each needing 5 at most before it can send, they cannot split 11 so that none of
  // them can finish (each would need more than 2 while holding 2 or fewer: 8 in all).
  // (What a stalled stream can cost the others is said in parts.ts's header.)
  const pool = new SlabPool(400, 1600, { slabSize: 100 })
  t.teardown(() => pool.close())
  let resume: (() => void) | undefined
  const stalledData = bytes(1000, 99)
  const stalled = Readable.from((async function * () {
    yield stalledData.subarray(0, 250) // three slabs of its first piece, then nothing
    await new Promise<void>(resolve => { resume = resolve })
    yield stalledData.subarray(250)
  })())
  const storing = store(pool, stalled, { holdBack: 0 })
  await until(() => resume !== undefined, 2000, 'the stalled stream read its first bytes', 5)
  t.equal(pool.stats.bytesInUse, 300, 'it holds three slabs')
  let next = 0
  let peak = 0
  const worker = async () => {
    for (let s = next++; s < 30; s = next++) {
      const data = bytes(100 + s * 97, s)
      const { got } = await store(pool, irregular(data, s, 120), { holdBack: [0, 1, 100][s % 3]!, maxLength: s % 4 === 0 ? undefined : data.length, whole: s % 2 === 0, delay: () => 1 })
      peak = Math.max(peak, pool.stats.bytesInUse)
      if (Buffer.compare(got, data) !== 0) throw new Error(`stream ${s}: bytes differ`)
    }
  }
  await within(Promise.all([worker(), worker(), worker(), worker()]), 30_000, 'the other streams, while one stalls')
  t.pass('30 streams finished while one held three slabs')
  t.ok(peak <= 1600, `never above the pool (peak ${peak / 100} slabs)`)
  t.equal(pool.stats.bytesInUse, 300, 'the stalled one still holds its three')
  resume!()
  const { got } = await within(storing, 5000, 'the stalled stream, once it resumes')
  t.equal(Buffer.compare(got, stalledData), 0, 'and the stalled one finishes too')
  t.equal(pool.stats.bytesInUse, 0)
})

t.test('a stream whose source fails while it waits for a slab stops waiting and gives its slabs back', async t => {
  const pool = new SlabPool(400, 800, { slabSize: 100 })
  t.teardown(() => pool.close())
  // B fills a whole piece (4 slabs) and stalls: it needs 1 more, which the pool keeps for it.
  let resume: (() => void) | undefined
  const stalled = Readable.from((async function * () {
    yield bytes(400, 1)
    await new Promise<void>(resolve => { resume = resolve })
    yield bytes(10, 2)
  })())
  const storingB = store(pool, stalled, { holdBack: 0 })
  await until(() => resume !== undefined, 2000, 'B read its piece', 5)
  // A gets three slabs and then must wait; its client goes away meanwhile.
  const failing = new Readable({ read () {} })
  failing.push(bytes(350, 3))
  const storingA = streamParts(failing, { pool, concurrency: 1, holdBack: 0, sendPart: async () => {} })
  await until(() => pool.stats.streamsWaiting === 1, 2000, 'A waits for a slab', 5)
  t.equal(pool.stats.bytesInUse, 700, 'A holds three slabs while it waits')
  failing.destroy(new Error('client went away'))
  await t.rejects(within(storingA, 2000, 'A gives up'), /client went away/, 'A rejects with its source\'s error, without a slab granted')
  t.equal(pool.stats.bytesInUse, 400, 'and its three slabs are back')
  resume!()
  await storingB
  t.equal(pool.stats.bytesInUse, 0)
})

t.test('a failing send stops the stream and returns its slabs; a failing source wins', async t => {
  const pool = new SlabPool(100, 400, { slabSize: 50 })
  t.teardown(() => pool.close())
  await t.rejects(streamParts(Readable.from([bytes(1000)]), {
    pool, concurrency: 2, holdBack: 0, sendPart: async i => { if (i === 2) throw new Error('S3 says no') }
  }), /S3 says no/)
  const failing = new Readable({ read () { this.push(bytes(150)); this.destroy(new Error('client went away')) } })
  await t.rejects(streamParts(failing, { pool, concurrency: 2, holdBack: 0, sendPart: async () => {} }), /client went away/)
  t.equal(pool.stats.bytesInUse, 0, 'no slab is lost')
  const tooBig = streamParts(Readable.from([bytes(1000)]), { pool, concurrency: 2, holdBack: 0, maxBytes: 300, tooLarge: () => new Error('too large'), sendPart: async () => {} })
  await t.rejects(tooBig, /too large/)
  t.equal(pool.stats.bytesInUse, 0, 'nor after a size limit')
})

// The gate (parts.ts header): 64 slabs of 64 KiB, pieces of 32 slabs; a 1 MiB stream is promised 16.
const MiB = 1024 * 1024
const gatePool = (t: Test) => {
  const pool = new SlabPool(2 * MiB, 4 * MiB)
  t.teardown(() => pool.close())
  return pool
}
/** A source the test feeds: `push` a chunk, `end` it. */
function fed () {
  const stream = new Readable({ read () {} })
  return { stream, push: (b: Buffer) => stream.push(b), end: () => stream.push(null) }
}
/** Samples what the pool has out (in use and promised); `peak` in slabs. */
function watchPool (t: Test, pool: SlabPool) {
  const seen = { peak: 0, waited: 0 }
  const timer = setInterval(() => {
    const s = pool.stats
    seen.peak = Math.max(seen.peak, (s.bytesInUse + s.bytesPromised) / SLAB_SIZE)
    seen.waited = Math.max(seen.waited, s.streamsWaiting)
  }, 1)
  t.teardown(() => clearInterval(timer))
  return seen
}
const settled = async (p: Promise<unknown>) => await Promise.race([p.then(() => true, () => true), sleep(20).then(() => false)])

t.test('the gate admits four 1 MiB streams into 64 slabs and holds the 5th until one finishes; none waits for a slab', async t => {
  const pool = gatePool(t)
  const seen = watchPool(t, pool)
  const tickets = Array.from({ length: 5 }, () => pool.admit(MiB))
  const admitted = await Promise.all(tickets.slice(0, 4))
  t.notOk(await settled(tickets[4]!), 'the 5th waits at the gate')
  t.equal(pool.stats.uploadsAtGate, 1)
  t.equal(pool.stats.bytesPromised, 64 * SLAB_SIZE, '16 slabs promised to each of the four')
  const data = Array.from({ length: 5 }, (_, i) => bytes(MiB, 10 + i))
  const sources = admitted.map(() => fed())
  const stores = admitted.map((ticket, i) => store(pool, sources[i]!.stream, { maxLength: MiB, whole: true, ticket }))
  // Each sends 15 of its 16 slabs' worth: all four at once, on their promises alone.
  for (const [i, s] of sources.entries()) for (let o = 0; o < 15 * SLAB_SIZE; o += SLAB_SIZE) s.push(data[i]!.subarray(o, o + SLAB_SIZE))
  await until(() => pool.stats.bytesInUse === 60 * SLAB_SIZE, 2000, 'the four fill 15 slabs each', 5)
  t.equal(pool.stats.bytesPromised, 4 * SLAB_SIZE, 'one promised slab left each')
  t.notOk(await settled(tickets[4]!), 'the 5th still waits')
  sources[0]!.push(data[0]!.subarray(15 * SLAB_SIZE))
  sources[0]!.end()
  const first = await within(stores[0]!, 2000, 'the first stream finishes')
  t.equal(Buffer.compare(first.got, data[0]!), 0)
  const fifth = await within(tickets[4]!, 2000, 'the 5th is admitted once the first is done')
  t.equal(pool.stats.uploadsAtGate, 0)
  const src5 = fed()
  const store5 = store(pool, src5.stream, { maxLength: MiB, whole: true, ticket: fifth })
  src5.push(data[4]!)
  src5.end()
  for (const [i, s] of sources.entries()) {
    if (i === 0) continue
    s.push(data[i]!.subarray(15 * SLAB_SIZE))
    s.end()
  }
  const rest = await within(Promise.all([...stores.slice(1), store5]), 5000, 'all finish')
  for (const [i, r] of rest.entries()) t.equal(Buffer.compare(r.got, data[i + 1]!), 0, `stream ${i + 2} intact`)
  t.equal(seen.waited, 0, 'no admitted stream ever waited for a slab')
  t.ok(seen.peak <= 64, `memory never above the pool (peak ${seen.peak} slabs, promised included)`)
  t.same({ ...pool.stats, bytesAllocated: 0 }, { bytesInUse: 0, bytesAllocated: 0, bytesMax: 64 * SLAB_SIZE, streamsWaiting: 0, uploadsAtGate: 0, bytesPromised: 0 })
})

t.test('a stream whose source stalls for over a second gives its promise back, and the gate opens for others', async t => {
  const pool = gatePool(t)
  const seen = watchPool(t, pool)
  // Four 1 MiB uploads send 64 KiB each and stall, holding the whole pool in promises.
  const stalled = await Promise.all(Array.from({ length: 4 }, () => pool.admit(MiB)))
  const sources = stalled.map(() => fed())
  const data = Array.from({ length: 4 }, (_, i) => bytes(MiB, 20 + i))
  const stores = stalled.map((ticket, i) => store(pool, sources[i]!.stream, { maxLength: MiB, whole: true, ticket }))
  for (const [i, s] of sources.entries()) s.push(data[i]!.subarray(0, SLAB_SIZE))
  await until(() => pool.stats.bytesInUse === 4 * SLAB_SIZE, 2000, 'each holds its first slab', 5)
  const started = Date.now()
  const others = Array.from({ length: 3 }, () => pool.admit(MiB))
  t.notOk(await settled(others[0]!), 'a new upload waits while the promises stand')
  const admitted = await within(Promise.all(others), 3000, 'the promises of the stalled streams go back')
  const waited = Date.now() - started
  t.ok(waited >= 800, `the gate opened once the stalled streams had waited their second (${waited} ms)`)
  t.equal(pool.stats.bytesInUse, 4 * SLAB_SIZE, 'the stalled streams keep what they filled, one slab each')
  t.equal(pool.stats.bytesPromised, 3 * 16 * SLAB_SIZE, 'only the new streams\' promises stand')
  const small = admitted.map((ticket, i) => store(pool, Readable.from([bytes(MiB, 40 + i)]), { maxLength: MiB, whole: true, ticket }))
  await within(Promise.all(small), 2000, 'the new streams complete beside the stalled ones')
  // The stalled ones resume, now the normal banker's way.
  for (const [i, s] of sources.entries()) { s.push(data[i]!.subarray(SLAB_SIZE)); s.end() }
  const done = await within(Promise.all(stores), 10_000, 'the stalled streams finish once their sources deliver')
  for (const [i, r] of done.entries()) t.equal(Buffer.compare(r.got, data[i]!), 0, `stalled stream ${i} intact`)
  t.ok(seen.peak <= 64, `memory never above the pool (peak ${seen.peak} slabs)`)
  t.equal(pool.stats.bytesInUse + pool.stats.bytesPromised, 0)
})

t.test('the gate is FIFO; a waiter that aborts leaves the queue, and an unused ticket gives its promise back', async t => {
  const pool = gatePool(t)
  const held = await Promise.all(Array.from({ length: 4 }, () => pool.admit(MiB)))
  const order: string[] = []
  const quitter = new AbortController()
  const a = pool.admit(MiB).then(c => { order.push('a'); return c })
  const b = pool.admit(MiB, quitter.signal).then(c => { order.push('b'); return c })
  const c = pool.admit(MiB).then(c => { order.push('c'); return c })
  t.equal(pool.stats.uploadsAtGate, 3)
  quitter.abort(new Error('client went away'))
  await t.rejects(b, /client went away/, 'the aborted waiter rejects with its reason')
  t.equal(pool.stats.uploadsAtGate, 2, 'and leaves the queue')
  held[0]!.release() // an upload that ends without using its ticket
  await within(a, 2000, 'the first in line enters')
  t.notOk(await settled(c), 'the next waits for the next promise')
  held[1]!.release()
  await within(c, 2000, 'then the next (the aborted one is not served)')
  t.same(order, ['a', 'c'])
  t.equal(pool.stats.uploadsAtGate, 0)
  await t.rejects(pool.admit(MiB, AbortSignal.abort(new Error('gone already'))), /gone already/)
  for (const x of [...held, await a, await c]) x.release()
  t.equal(pool.stats.bytesPromised, 0, 'every promise is back')
})
