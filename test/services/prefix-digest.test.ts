/**
 * The running SHA-256 of a session's contiguous prefix (src/services/prefix-digest.ts): folds
 * in order whatever way the chunks come, keeps chunks in memory only within its budget and for a
 * minute, and never passes off a hash of other bytes (the caller checks `digests`).
 */
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import t from 'tap'
import { createPrefixDigests } from '../../src/services/prefix-digest.js'

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
const chunks = [Buffer.alloc(100, 1), Buffer.alloc(100, 2), Buffer.alloc(100, 3), Buffer.alloc(40, 4)]

/**
 * Streams chunk `i` through a fold when one is offered, else keeps it; then commits it. `read`:
 * how the store reads it back (fs), if it can.
 */
function send (p: ReturnType<typeof createPrefixDigests>, id: string, i: number, data = chunks[i]!, read?: () => Readable) {
  const fold = p.streamFold(id, i)
  const kept = fold === undefined ? p.retain() : undefined
  for (let at = 0; at < data.length; at += 30) (fold?.update ?? kept!.add)(data.subarray(at, at + 30))
  fold?.done(sha(data), data.length)
  p.committed(id, i, { sha256: sha(data), size: data.length }, { folded: fold !== undefined, kept, read })
}

const digestOf = async (p: ReturnType<typeof createPrefixDigests>, id: string) => {
  const s = await p.snapshot(id, 1000)
  return s === undefined ? undefined : { bytes: s.bytes, digests: s.digests, hex: s.hash.digest('hex') }
}

t.test('in order, out of order and interleaved: the prefix covers every chunk, in order', async t => {
  const whole = sha(Buffer.concat(chunks))
  for (const order of [[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]]) {
    const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 1000 })
    for (const i of order) send(p, 's', i)
    const d = await digestOf(p, 's')
    t.same(d, { bytes: 340, digests: chunks.map(sha), hex: whole }, `order ${order.join(',')}`)
    t.equal(p.retainedBytes, 0, 'nothing kept once folded')
  }
})

t.test('a chunk over the budget is not kept: the prefix stops before it, and nothing more is held', async t => {
  const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 150 })
  send(p, 's', 1)
  t.equal(p.retainedBytes, 100)
  send(p, 's', 2) // 100 more do not fit: let go of as it streams
  t.equal(p.retainedBytes, 100)
  send(p, 's', 0)
  const d = await digestOf(p, 's')
  t.equal(d!.bytes, 200, 'chunks 0 and 1 folded; 2 was not kept')
  t.equal(d!.hex, sha(Buffer.concat(chunks.slice(0, 2))))
  t.equal(p.retainedBytes, 0)
})

t.test('a chunk kept for more than a minute is let go; forget and idle expiry let go of the rest', async t => {
  let now = 1_000_000
  const p = createPrefixDigests({ now: () => now, idleMs: 120_000, retainBytes: 1000 })
  send(p, 'a', 1)
  send(p, 'b', 2)
  t.equal(p.retainedBytes, 200)
  now += 61_000
  p.retain().release()
  t.equal(p.retainedBytes, 0, 'let go after RETAIN_MS')
  send(p, 'a', 2)
  send(p, 'b', 1)
  t.equal(p.retainedBytes, 200)
  p.forget('a')
  t.equal(p.retainedBytes, 100)
  now += 121_000
  t.equal(p.streamFold('b', 0) !== undefined, true, 'an idle session starts over')
  t.equal(p.retainedBytes, 0)
})

t.test('a replaced chunk: its first bytes stay in the prefix, and the digests tell', async t => {
  const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 1000 })
  send(p, 's', 0)
  send(p, 's', 1)
  send(p, 's', 1, Buffer.alloc(100, 9)) // a retry with other bytes, behind the prefix
  const d = await digestOf(p, 's')
  t.same(d!.digests, [sha(chunks[0]!), sha(chunks[1]!)], 'the caller compares these with the records and finds chunk 1 differs')
})

t.test('a chunk read back from storage is folded only if its bytes still hash to its record', async t => {
  const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 1000 })
  p.committed('s', 1, { sha256: sha(chunks[1]!), size: 100 }, { read: () => Readable.from([chunks[1]!]) })
  p.committed('s', 2, { sha256: sha(chunks[2]!), size: 100 }, { read: () => Readable.from([Buffer.alloc(100, 7)]) }) // overwritten since
  send(p, 's', 0)
  const d = await digestOf(p, 's')
  t.equal(d!.bytes, 200, 'chunks 0 and 1; chunk 2 read back other bytes')
  t.equal(d!.hex, sha(Buffer.concat(chunks.slice(0, 2))))
})

t.test('a chunk over the budget is read back where the store can; a kept one is folded from memory, not read', async t => {
  const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 150 })
  let reads = 0
  const fromStore = (data: Buffer) => () => { reads++; return Readable.from([data]) }
  for (const i of [1, 2]) send(p, 's', i, chunks[i], fromStore(chunks[i]!))
  t.equal(p.retainedBytes, 100, 'chunk 1 kept; chunk 2 did not fit')
  send(p, 's', 0)
  send(p, 's', 3)
  const d = await digestOf(p, 's')
  t.equal(d!.hex, sha(Buffer.concat(chunks)), 'every chunk folded, in order')
  t.equal(reads, 1, 'only chunk 2 was read back')
  t.equal(p.retainedBytes, 0)
})

t.test('a snapshot waits for folds under way, up to its limit', async t => {
  const p = createPrefixDigests({ now: Date.now, idleMs: 60_000, retainBytes: 1000 })
  const fold = p.streamFold('s', 0)!
  fold.update(chunks[0]!)
  t.equal(await p.snapshot('s', 50), undefined, 'a fold that does not end in time: no prefix')
  setTimeout(() => fold.done(sha(chunks[0]!), 100), 20)
  t.equal((await p.snapshot('s', 1000))!.bytes, 100)
})

t.test('a fold\'s running digest is the SHA-256 of the session through the bytes folded so far, and may name the chunk', async t => {
  const p = createPrefixDigests({ now: () => 0, idleMs: 60_000, retainBytes: 0 })
  const a = Buffer.from('first append ')
  const b = Buffer.from('and the second')
  const fa = p.streamFold('u', 0)!
  fa.update(a)
  const throughA = fa.running()
  t.equal(throughA, sha(a))
  fa.done(throughA, a.length)
  const fb = p.streamFold('u', 1)!
  fb.update(b.subarray(0, 3))
  t.equal(fb.running(), sha(Buffer.concat([a, b.subarray(0, 3)])), 'midway, and the fold goes on')
  fb.update(b.subarray(3))
  const throughB = fb.running()
  fb.done(throughB, b.length)
  const d = await p.snapshot('u', 1000)
  t.same(d!.digests, [throughA, throughB], 'the identities given, in order')
  t.equal(d!.hash.digest('hex'), sha(Buffer.concat([a, b])))
})
