/**
 * The S3 part writer (src/blob/s3/parts.ts) on its own: pieces reassemble byte for byte, the
 * hold-back rule keeps every final piece ≥ holdBack, and any number of concurrent streams never
 * use more buffers than the pool holds. Sending is a function here (the S3 side is covered by
 * s3-store.test.ts against a real S3).
 */
import { Readable } from 'node:stream'
import t from 'tap'
import { PartBuffers, streamParts } from '../../src/blob/s3/parts.js'
import { bytes } from '../helpers/streams.js'

/** `data` as a stream of irregular chunks. */
function irregular (data: Buffer, seed: number): Readable {
  const chunks: Buffer[] = []
  let x = seed
  for (let at = 0; at < data.length;) {
    x = (x * 1103515245 + 12345) % 2 ** 31
    const n = 1 + (x % 700)
    chunks.push(data.subarray(at, at + n))
    at += n
  }
  return Readable.from(chunks)
}

async function toBuffer (body: Buffer | Readable): Promise<Buffer> {
  if (Buffer.isBuffer(body)) return Buffer.from(body) // copy: the pool reuses the memory
  const out: Buffer[] = []
  for await (const c of body) out.push(Buffer.from(c as Buffer))
  return Buffer.concat(out)
}

t.test('pieces reassemble exactly; with hold-back the final piece is never short', async t => {
  const pool = new PartBuffers(1000, 4)
  t.teardown(() => pool.close())
  for (const size of [0, 1, 999, 1000, 1001, 1499, 1500, 2999, 3000, 3001, 10_250]) {
    for (const holdBack of [0, 500]) {
      const data = bytes(size, size + 1)
      const pieces = new Map<number, Buffer>()
      let whole: Buffer | undefined
      const result = await streamParts(irregular(data, size), {
        pool,
        concurrency: 2,
        holdBack,
        sendPart: async (i, body) => { pieces.set(i, await toBuffer(body)) },
        ...(holdBack === 0 ? { sendWhole: async (body: Buffer) => { whole = Buffer.from(body) } } : {})
      })
      const got = whole ?? Buffer.concat([...pieces.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1]))
      t.equal(Buffer.compare(got, data), 0, `size ${size}, holdBack ${holdBack}: bytes`)
      t.equal(result.size, size)
      const lengths = [...pieces.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1].length)
      if (holdBack > 0 && lengths.length > 1) t.ok(lengths.at(-1)! >= holdBack, `size ${size}: last piece ${lengths.at(-1)!}`)
      if (holdBack === 0 && size <= 1000) t.ok(whole !== undefined, `size ${size}: one piece is stored whole`)
    }
  }
  t.equal(pool.size <= 4, true)
})

t.test('concurrent streams share the pool and never exceed it; every buffer comes back', async t => {
  const pool = new PartBuffers(1024, 3)
  t.teardown(() => pool.close())
  let peak = 0
  const results = await Promise.all(Array.from({ length: 10 }, async (_, s) => {
    const data = bytes(20_000 + s * 333, s + 7)
    const pieces = new Map<number, Buffer>()
    await streamParts(irregular(data, s), {
      pool,
      concurrency: 4,
      holdBack: 0,
      sendPart: async (i, body) => {
        peak = Math.max(peak, pool.size)
        await new Promise(resolve => setTimeout(resolve, Math.random() * 5))
        pieces.set(i, await toBuffer(body))
      }
    })
    return Buffer.compare(Buffer.concat([...pieces.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1])), data)
  }))
  t.same(results, Array(10).fill(0), 'every stream reassembles')
  t.ok(peak <= 3, `at most 3 buffers ever allocated (peak ${peak})`)
  const held = await pool.acquire(3)
  t.equal(held.length, 3, 'all three buffers are free again')
})

t.test('a failing send stops the stream and returns its buffers; a failing source wins', async t => {
  const pool = new PartBuffers(100, 2)
  t.teardown(() => pool.close())
  await t.rejects(streamParts(Readable.from([bytes(1000)]), {
    pool, concurrency: 2, holdBack: 0, sendPart: async i => { if (i === 2) throw new Error('S3 says no') }
  }), /S3 says no/)
  const failing = new Readable({ read () { this.push(bytes(150)); this.destroy(new Error('client went away')) } })
  await t.rejects(streamParts(failing, { pool, concurrency: 2, holdBack: 0, sendPart: async () => {} }), /client went away/)
  t.equal((await pool.acquire(2)).length, 2, 'no buffer is lost')
})
