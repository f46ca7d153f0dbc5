/**
 * Integrity end to end (digests the service computes, digests clients declare) and resumable
 * downloads that keep the download limit exact, through real HTTP, run once per driver pair
 * (fs-local.test.ts, s3-redis.test.ts).
 */
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import type { Test } from 'tap'
import type { AppOverrides } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { claimBudget } from '../../src/services/files.js'
import { eventually, startApp, testEnv, upload, type Backends, type DriverPair } from '../helpers/app.js'
import { post, sendChunk, startSession } from '../helpers/chunks.js'
import { listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const MiB = 1024 * 1024
const reprDigest = (data: Uint8Array) => `sha-256=:${createHash('sha256').update(data).digest('base64')}:`

/** GETs a download and stops reading after `bytes` bytes (the connection is cut). */
function cutDownload (url: string, bytes: number): Promise<{ etag: string, digest: string, received: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, res => {
      const chunks: Buffer[] = []
      let got = 0
      res.on('data', (c: Buffer) => {
        chunks.push(c)
        got += c.length
        if (got >= bytes) {
          req.destroy()
          resolve({ etag: String(res.headers.etag), digest: String(res.headers['repr-digest']), received: Buffer.concat(chunks).subarray(0, bytes) })
        }
      })
      res.on('error', () => {})
      res.on('end', () => reject(new Error(`the download ended after ${got} bytes (status ${res.statusCode}), before the cut at ${bytes}`)))
    })
    req.on('error', err => { if (!req.destroyed) reject(err) })
  })
}

export function integritySuite (t: Test, pair: DriverPair, backends: Backends) {
  /** Two instances on the same state and storage (for fs+local: one DATA_DIR). */
  async function instances (t: Test, extra: Record<string, string> = {}, overrides: AppOverrides = {}) {
    const env = testEnv(t, pair, backends, extra)
    const a = await startApp(t, loadConfig(env), overrides)
    const b = await startApp(t, loadConfig(env), overrides)
    return [a, b] as const
  }

  t.test('digests: /upload answers size and SHA-256; GET and HEAD send Repr-Digest and ETags', async t => {
    const [{ url }] = await instances(t)
    const data = bytes(200_000)
    const up = await upload(url, [['file', { data }], ['max_downloads', '2']])
    t.same(up.body, { code: up.body.code, size: 200_000, sha256: sha256Of(data) })
    const head = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
    t.equal(head.headers.get('repr-digest'), reprDigest(data))
    t.equal(head.headers.get('accept-ranges'), 'bytes')
    t.equal(head.headers.get('etag'), `"s-${Buffer.from(sha256Of(data), 'hex').toString('base64url')}"`, 'HEAD\'s ETag names the file')
    const [one, two] = [await fetch(`${url}/download/${up.body.code}`), await fetch(`${url}/download/${up.body.code}`)]
    t.equal(one.headers.get('repr-digest'), reprDigest(data))
    t.equal(sha256Of(new Uint8Array(await one.arrayBuffer())), sha256Of(data))
    await two.arrayBuffer()
    t.match(one.headers.get('etag'), /^"c-[A-Za-z0-9_-]{22}"$/, 'a GET\'s ETag names its claim')
    t.not(one.headers.get('etag'), two.headers.get('etag'), 'each claim has its own')
    t.not(one.headers.get('etag'), head.headers.get('etag'), 'HEAD never shows a claim')
  })

  t.test('digests: a declared sha256 is checked; a mismatch stores and records nothing', async t => {
    const [running] = await instances(t)
    const data = bytes(50_000, 7)
    const good = await upload(running.url, [['sha256', sha256Of(data).toUpperCase()], ['file', { data }]])
    t.equal(good.status, 200, 'upper-case hex is fine')
    const after = await upload(running.url, [['file', { data }], ['sha256', sha256Of(data)]])
    t.equal(after.status, 200, 'the field may follow the file')
    const wrong = await upload(running.url, [['file', { data }], ['sha256', 'ab'.repeat(32)]])
    t.equal(wrong.status, 400)
    t.match(wrong.body, { code: 'DROPCODE_DIGEST_MISMATCH', declared_sha256: 'ab'.repeat(32), sha256: sha256Of(data), error: String })
    for (const bad of ['ab'.repeat(31), 'zz'.repeat(32), `${'ab'.repeat(32)} `]) {
      const res = await upload(running.url, [['sha256', bad], ['file', { data }]])
      t.equal(res.status, 400, `malformed ${JSON.stringify(bad)}`)
      t.equal(res.body.code, 'DROPCODE_INVALID_FIELD')
    }
    t.equal((await listStored(running.config)).length, 2, 'only the two good uploads are stored')
  })

  t.test('digests: chunk_sha256 per chunk, verify lists what the service holds, complete answers the file digest', async t => {
    const [{ url }] = await instances(t)
    const data = bytes(3 * 100_000 + 5, 3)
    const parts = [0, 1, 2, 3].map(i => data.subarray(i * 100_000, Math.min((i + 1) * 100_000, data.length)))
    const id = await startSession(url, [['filename', 'x.bin'], ['total_chunks', '4'], ['sha256', sha256Of(data)]])
    const send = (i: number, declared: string, chunk = parts[i]!) =>
      post(url, '/upload/chunk', [['upload_id', id], ['chunk_index', String(i)], ['chunk_sha256', declared]], chunk)
    for (const i of [0, 1, 3]) t.equal((await send(i, sha256Of(parts[i]!))).status, 200)
    const bad = await send(1, sha256Of(parts[1]!), bytes(100_000, 99)) // corrupted on the way
    t.equal(bad.status, 400)
    t.match(bad.body, { code: 'DROPCODE_DIGEST_MISMATCH', sha256: sha256Of(bytes(100_000, 99)) })
    const verify = await post(url, '/upload/verify', [['upload_id', id]])
    t.same(verify.body.missing_chunks, [1, 2], 'the bad chunk is missing afterwards (its earlier copy too)')
    t.same(verify.body.chunks, [0, 3].map(i => ({ index: i, size: parts[i]!.length, sha256: sha256Of(parts[i]!) })))
    for (const i of [1, 2]) t.equal((await send(i, sha256Of(parts[i]!))).status, 200)
    const done = await post(url, '/upload/complete', [['upload_id', id]])
    t.same(done.body, { code: done.body.code, size: data.length, sha256: sha256Of(data) })
    t.same((await post(url, '/upload/complete', [['upload_id', id]])).body, done.body, 'a repeated complete answers the same')
    const res = await fetch(`${url}/download/${done.body.code}`)
    t.equal(res.headers.get('repr-digest'), reprDigest(data))
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
  })

  t.test('digests: a whole-file sha256 that does not match at completion stores nothing and closes the session', async t => {
    const [running] = await instances(t)
    const id = await startSession(running.url, [['filename', 'x.bin'], ['total_chunks', '2'], ['sha256', 'cd'.repeat(32)]])
    await sendChunk(running.url, id, 0, bytes(1000))
    await sendChunk(running.url, id, 1, bytes(10))
    const done = await post(running.url, '/upload/complete', [['upload_id', id]])
    t.equal(done.status, 400)
    t.match(done.body, { code: 'DROPCODE_DIGEST_MISMATCH', declared_sha256: 'cd'.repeat(32) })
    t.equal((await post(running.url, '/upload/verify', [['upload_id', id]])).status, 404, 'the session is closed')
    await eventually(async () => { if ((await listStored(running.config)).length > 0) throw new Error('stored') })
    t.same(await listStored(running.config), [], 'nothing stored')
  })

  t.test('resume: a 64 MiB download cut at 60 % resumes on the other instance, counting nothing', async t => {
    const [a, b] = await instances(t)
    const data = bytes(64 * MiB, 11)
    const up = await upload(a.url, [['file', { data, filename: 'big.bin' }]])
    const cut = await cutDownload(`${a.url}/download/${up.body.code}`, Math.floor(0.6 * data.length))
    const res = await fetch(`${b.url}/download/${up.body.code}`, { headers: { range: `bytes=${cut.received.length}-`, 'if-range': cut.etag } })
    t.equal(res.status, 206)
    t.equal(res.headers.get('content-range'), `bytes ${cut.received.length}-${data.length - 1}/${data.length}`)
    t.equal(res.headers.get('etag'), cut.etag, 'the same claim')
    t.equal(res.headers.get('repr-digest'), cut.digest)
    const rest = Buffer.from(await res.arrayBuffer())
    const whole = Buffer.concat([cut.received, rest])
    t.equal(reprDigest(whole), cut.digest, 'the bytes check against Repr-Digest')
    t.equal((await fetch(`${a.url}/download/${up.body.code}`)).status, 404, 'still one download: max_downloads was 1')
    const again = await fetch(`${b.url}/download/${up.body.code}`, { headers: { range: 'bytes=0-', 'if-range': cut.etag } })
    t.equal(again.status, 404, 'a claim whose last byte was sent is over')
    await eventually(async () => { if ((await listStored(a.config)).length > 0) throw new Error('not yet deleted') })
    t.same(await listStored(a.config), [], 'the object is deleted once the claim is over')
  })

  t.test('resume: guessed and replayed ETags, Range without If-Range, multi-range, past the end', async t => {
    const [{ url }] = await instances(t)
    // Large enough that a cut is a real cut, not bytes already handed to the kernel.
    const data = bytes(8 * MiB, 5)
    const one = (await upload(url, [['file', { data }], ['max_downloads', '3']])).body.code
    const other = (await upload(url, [['file', { data: 'other' }]])).body.code
    const cut = await cutDownload(`${url}/download/${one}`, 100)
    const guessed = await fetch(`${url}/download/${one}`, { headers: { range: 'bytes=100-', 'if-range': `"c-${randomBytes(16).toString('base64url')}"` } })
    t.equal(guessed.status, 200, 'a guessed ETag: the whole file, counted')
    t.equal((await guessed.arrayBuffer()).byteLength, data.length)
    const replayed = await fetch(`${url}/download/${other}`, { headers: { range: 'bytes=1-', 'if-range': cut.etag } })
    t.equal(replayed.status, 200, 'another file\'s claim: the whole file, counted')
    t.equal(await replayed.text(), 'other')
    t.equal((await fetch(`${url}/download/${other}`)).status, 404, '…so that file is used up')
    const unsatisfiable = await fetch(`${url}/download/${one}`, { headers: { range: `bytes=${data.length}-`, 'if-range': cut.etag } })
    t.equal(unsatisfiable.status, 416)
    t.equal(unsatisfiable.headers.get('content-range'), `bytes */${data.length}`)
    await unsatisfiable.text()
    const multi = await fetch(`${url}/download/${one}`, { headers: { range: 'bytes=0-1,5-9', 'if-range': cut.etag } })
    t.equal(multi.status, 200, 'several ranges: the whole file, under the same claim')
    t.equal(multi.headers.get('etag'), cut.etag)
    t.equal(sha256Of(new Uint8Array(await multi.arrayBuffer())), sha256Of(data))
    const last = await fetch(`${url}/download/${one}`)
    t.equal(last.status, 200, 'three downloads counted so far: the cut one, the guessed one, this one')
    await last.arrayBuffer()
    t.equal((await fetch(`${url}/download/${one}`)).status, 404)
  })

  t.test('resume: suffix ranges (bytes=-N) with If-Range of a claim: the last N bytes, all of a shorter file, 416 for -0', async t => {
    const [a, b] = await instances(t)
    const data = bytes(8 * MiB, 6) // more than loopback's socket buffers, so a cut is real
    const code = (await upload(a.url, [['file', { data }], ['max_downloads', '3']])).body.code
    const size = data.length

    const first = await cutDownload(`${a.url}/download/${code}`, 100)
    const tail = await fetch(`${b.url}/download/${code}`, { headers: { range: 'bytes=-1000', 'if-range': first.etag } })
    t.equal(tail.status, 206)
    t.equal(tail.headers.get('content-range'), `bytes ${size - 1000}-${size - 1}/${size}`)
    t.equal(tail.headers.get('content-length'), '1000')
    t.equal(tail.headers.get('etag'), first.etag, 'the same claim')
    t.equal(Buffer.compare(Buffer.from(await tail.arrayBuffer()), data.subarray(size - 1000)), 0, 'exactly the last 1000 bytes')

    const second = await cutDownload(`${a.url}/download/${code}`, 100)
    const longer = await fetch(`${b.url}/download/${code}`, { headers: { range: `bytes=-${size + 12345}`, 'if-range': second.etag } })
    t.equal(longer.status, 206, 'a suffix longer than the file')
    t.equal(longer.headers.get('content-range'), `bytes 0-${size - 1}/${size}`, '…is the whole file')
    t.equal(sha256Of(new Uint8Array(await longer.arrayBuffer())), sha256Of(data))

    const third = await cutDownload(`${a.url}/download/${code}`, 100)
    const empty = await fetch(`${b.url}/download/${code}`, { headers: { range: 'bytes=-0', 'if-range': third.etag } })
    t.equal(empty.status, 416, 'an empty suffix cannot be satisfied')
    t.equal(empty.headers.get('content-range'), `bytes */${size}`)
    await empty.text()
    const rest = await fetch(`${b.url}/download/${code}`, { headers: { range: 'bytes=100-', 'if-range': third.etag } })
    t.equal(rest.status, 206, 'the claim is still resumable after the 416')
    t.equal(Buffer.compare(Buffer.concat([third.received, Buffer.from(await rest.arrayBuffer())]), Buffer.from(data)), 0)
    t.equal((await fetch(`${a.url}/download/${code}`)).status, 404, 'three claims counted, the resumes none')
  })

  t.test('resume: a cut claim stays resumable for DOWNLOAD_RESUME_SECONDS, then the object goes', async t => {
    let now = Date.now()
    const [running] = await instances(t, { DOWNLOAD_RESUME_SECONDS: '60' }, { now: () => now })
    const data = bytes(16 * MiB, 9) // more than loopback's socket buffers, so the cut is real
    const code = (await upload(running.url, [['file', { data }]])).body.code
    const cut = await cutDownload(`${running.url}/download/${code}`, 1000)
    const early = await fetch(`${running.url}/download/${code}`, { headers: { range: 'bytes=1000-1999', 'if-range': cut.etag } })
    t.equal(early.status, 206)
    t.equal(Buffer.compare(Buffer.from(await early.arrayBuffer()), data.subarray(1000, 2000)), 0)
    await eventually(async () => { if ((await listStored(running.config)).length !== 1) throw new Error('kept') })
    now += 61_000
    const late = await fetch(`${running.url}/download/${code}`, { headers: { range: 'bytes=2000-', 'if-range': cut.etag } })
    t.equal(late.status, 404, 'after the window: no claim, and the file is used up')
    await running.app.sweeper.sweepOnce()
    t.same(await listStored(running.config), [], 'the sweeper removed the object after the window')
  })

  t.test('resume: with max_downloads=1, 200 concurrent GETs make one claim; resumes never add one', async t => {
    const [a, b] = await instances(t)
    const data = bytes(16 * MiB, 4) // more than loopback's socket buffers, so the cut is real
    const code = (await upload(a.url, [['file', { data }]])).body.code
    // Every client reads the status and headers, then hangs up: the winner's download is cut.
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => new Promise<{ status: number, etag: string | undefined }>((resolve, reject) => {
      const req = http.get(`${(i % 2 === 0 ? a : b).url}/download/${code}`, { headers: { range: 'bytes=0-' } }, res => {
        resolve({ status: res.statusCode!, etag: res.headers.etag })
        req.destroy()
      })
      req.on('error', err => { if (!req.destroyed) reject(err) })
    })))
    const winners = results.filter(r => r.status === 200)
    t.equal(winners.length, 1, 'exactly one claim')
    t.equal(results.filter(r => r.status === 404).length, 199)
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${(i % 2 === 0 ? a : b).url}/download/${code}`, { headers: { range: `bytes=${i}-${i + 9}`, 'if-range': winners[0]!.etag! } })
      t.equal(res.status, 206, `resume ${i}`)
      t.equal(Buffer.compare(Buffer.from(await res.arrayBuffer()), data.subarray(i, i + 10)), 0)
    }
    t.equal((await fetch(`${a.url}/download/${code}`)).status, 404, 'still one download')
  })

  t.test('resume: a claim\'s ETag serves at most the file\'s size plus the allowance, then the claim is over (claim_etag_reserves)', async t => {
    const [a, b] = await instances(t)
    const data = bytes(16 * MiB, 6) // more than loopback's socket buffers, so the cut is real
    const code = (await upload(a.url, [['file', { data }]])).body.code
    const cut = await cutDownload(`${a.url}/download/${code}`, 1000)
    // The attack as found: all but the last byte, again and again, alternating instances.
    const answers: Array<{ status: number, bytes: number }> = []
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${(i % 2 === 0 ? b : a).url}/download/${code}`, { headers: { range: `bytes=0-${data.length - 2}`, 'if-range': cut.etag } })
      answers.push({ status: res.status, bytes: (await res.arrayBuffer()).byteLength })
    }
    const served = answers.filter(r => r.status === 206).reduce((n, r) => n + r.bytes, 0)
    t.ok(cut.received.length + served <= claimBudget(data.length), `${served} bytes served on resumes; budget ${claimBudget(data.length)}`)
    t.same(answers.map(r => r.status), [206, 404, 404, 404, 404, 404], 'one more copy at most, then 404: max_downloads was 1')

    const two = (await upload(a.url, [['file', { data }], ['max_downloads', '2']])).body.code
    const first = await cutDownload(`${a.url}/download/${two}`, 1000)
    const resumed = await fetch(`${b.url}/download/${two}`, { headers: { range: `bytes=0-${data.length - 2}`, 'if-range': first.etag } })
    t.equal(resumed.status, 206)
    await resumed.arrayBuffer()
    const over = await fetch(`${a.url}/download/${two}`, { headers: { range: `bytes=0-${data.length - 2}`, 'if-range': first.etag } })
    t.equal(over.status, 200, 'past the budget, If-Range no longer matches: a new, whole, counted download')
    t.not(over.headers.get('etag'), first.etag, 'under a new claim')
    t.equal(sha256Of(new Uint8Array(await over.arrayBuffer())), sha256Of(data))
    t.equal((await fetch(`${b.url}/download/${two}`)).status, 404, 'both downloads used')
  })
}
