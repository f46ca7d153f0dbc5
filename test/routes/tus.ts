/**
 * tus 1.0.0 on /files/ (src/routes/tus.ts) through real HTTP (Node's fetch, raw sockets for cut
 * appends), run once per driver pair (tus-fs.test.ts, tus-s3.test.ts): each extension, each
 * refusal with its status and JSON body, and where an upload ends up (a code, a download equal
 * to what was sent, nothing left in storage after a termination).
 */
import { createHash } from 'node:crypto'
import net from 'node:net'
import type { Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { API_KEY, eventually, startApp, testEnv, type Backends, type DriverPair } from '../helpers/app.js'
import { describeStored, listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const MiB = 1024 * 1024
const TUS = { 'tus-resumable': '1.0.0', 'x-client-key': API_KEY }
const b64 = (s: string) => Buffer.from(s).toString('base64')
const metadata = (m: Record<string, string>) => Object.entries(m).map(([k, v]) => `${k} ${b64(v)}`).join(',')

async function create (url: string, headers: Record<string, string>, body?: Uint8Array) {
  const res = await fetch(`${url}/files/`, { method: 'POST', headers: { ...TUS, ...headers, ...(body !== undefined ? { 'content-type': 'application/offset+octet-stream' } : {}) }, ...(body !== undefined ? { body } : {}) })
  await res.arrayBuffer()
  return res
}

async function patch (url: string, location: string, offset: number, body: Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}${location}`, { method: 'PATCH', headers: { ...TUS, 'content-type': 'application/offset+octet-stream', 'upload-offset': String(offset), ...headers }, body })
  const text = await res.text()
  return { res, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

const head = async (url: string, location: string, key = API_KEY) => {
  const res = await fetch(`${url}${location}`, { method: 'HEAD', headers: { ...TUS, 'x-client-key': key } })
  return res
}

async function download (url: string, code: string) {
  const res = await fetch(`${url}/download/${code}`)
  return { status: res.status, data: Buffer.from(await res.arrayBuffer()), disposition: res.headers.get('content-disposition') }
}

/** A PATCH over a raw socket that sends `sent` of the `declared` bytes and is then cut. */
async function cutPatch (url: string, location: string, offset: number, data: Buffer, declared: number): Promise<void> {
  const { port } = new URL(url)
  const socket = net.connect(Number(port), '127.0.0.1')
  socket.on('error', () => {})
  await new Promise<void>(resolve => socket.once('connect', resolve))
  socket.write(`PATCH ${location} HTTP/1.1\r\nhost: 127.0.0.1\r\ntus-resumable: 1.0.0\r\nx-client-key: ${API_KEY}\r\ncontent-type: application/offset+octet-stream\r\nupload-offset: ${offset}\r\ncontent-length: ${declared}\r\n\r\n`)
  await new Promise<void>(resolve => socket.write(data, () => resolve()))
  // Long enough for the server to take what was sent, then the client goes.
  await new Promise(resolve => setTimeout(resolve, 500))
  socket.destroy()
}

export function tusSuite (t: Test, pair: DriverPair, backends: Backends) {
  const start = async (t: Test, extra: Record<string, string> = {}) => {
    const config = loadConfig(testEnv(t, pair, backends, { MAX_FILE_SIZE: String(64 * MiB), ...extra }))
    return await startApp(t, config)
  }

  t.test('tus: OPTIONS advertises exactly what is implemented; a request without Tus-Resumable 1.0.0 is 412 with Tus-Version', async t => {
    const { url } = await start(t)
    const res = await fetch(`${url}/files/`, { method: 'OPTIONS' })
    t.equal(res.status, 204)
    t.equal(res.headers.get('tus-version'), '1.0.0')
    t.equal(res.headers.get('tus-resumable'), '1.0.0')
    t.equal(res.headers.get('tus-max-size'), String(64 * MiB), 'Tus-Max-Size is MAX_FILE_SIZE')
    t.same(res.headers.get('tus-extension')?.split(','), ['creation', 'creation-with-upload', 'creation-defer-length', 'termination', 'expiration', 'checksum', 'concatenation'])
    t.same(res.headers.get('tus-checksum-algorithm')?.split(','), ['sha1', 'sha256', 'md5'])
    for (const version of [undefined, '0.2.2']) {
      const bad = await fetch(`${url}/files/`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'upload-length': '1', ...(version !== undefined ? { 'tus-resumable': version } : {}) } })
      t.equal(bad.status, 412, `Tus-Resumable ${String(version)}`)
      t.equal(bad.headers.get('tus-version'), '1.0.0')
      t.equal((await bad.json() as { code: string }).code, 'DROPCODE_TUS_VERSION')
    }
    const noKey = await fetch(`${url}/files/`, { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': '1' } })
    t.equal(noKey.status, 401, 'the API key is required as everywhere')
    t.equal(noKey.headers.get('tus-resumable'), '1.0.0', 'every answer says the protocol version')
  })

  t.test('tus: create, two appends, and the code comes back on the append that completed it and on HEAD; the download is the bytes sent', async t => {
    const { url } = await start(t)
    const data = bytes(3 * MiB + 12_345, 3)
    const created = await create(url, { 'upload-length': String(data.length), 'upload-metadata': metadata({ filename: 'report.pdf', max_downloads: '2', expiry_hours: '5' }) })
    t.equal(created.status, 201)
    const location = created.headers.get('location')!
    t.match(location, /^\/files\/[A-Za-z0-9_-]{22}$/)
    t.ok(Date.parse(created.headers.get('upload-expires')!) > Date.now(), 'Upload-Expires: when the upload expires unless continued')
    const first = await patch(url, location, 0, data.subarray(0, MiB))
    t.equal(first.res.status, 204)
    t.equal(first.res.headers.get('upload-offset'), String(MiB))
    t.equal(first.res.headers.get('dropcode-code'), null, 'no code before the last byte')
    t.ok(first.res.headers.get('upload-expires'))
    const during = await head(url, location)
    t.equal(during.status, 200)
    t.equal(during.headers.get('upload-offset'), String(MiB))
    t.equal(during.headers.get('upload-length'), String(data.length))
    t.equal(during.headers.get('cache-control'), 'no-store')
    t.ok(during.headers.get('upload-metadata')?.includes(`filename ${b64('report.pdf')}`), 'HEAD answers the metadata back')
    const last = await patch(url, location, MiB, data.subarray(MiB))
    t.equal(last.res.status, 204)
    t.equal(last.res.headers.get('upload-offset'), String(data.length))
    const code = last.res.headers.get('dropcode-code')
    t.match(code, /^[A-Za-z0-9]{6}$/, 'Dropcode-Code on the completing append')
    t.equal(last.res.headers.get('repr-digest'), `sha-256=:${Buffer.from(sha256Of(data), 'hex').toString('base64')}:`)
    const after = await head(url, location)
    t.equal(after.headers.get('dropcode-code'), code, 'and on HEAD afterwards')
    t.equal(after.headers.get('upload-offset'), String(data.length))
    const again = await patch(url, location, data.length, new Uint8Array(0))
    t.equal(again.res.headers.get('dropcode-code'), code, 'a repeated final append (its answer lost) gets the same code')
    const got = await download(url, code!)
    t.equal(got.status, 200)
    t.equal(sha256Of(got.data), sha256Of(data), 'the download is the bytes sent')
    t.match(got.disposition, /report\.pdf/)
    t.equal((await download(url, code!)).status, 200, 'max_downloads 2 from the metadata: a second download')
    t.equal((await download(url, code!)).status, 404, 'and no third')
  })

  t.test('tus: appends through one instance are hashed once, as they stream: each record names its bytes by the running SHA-256, and completion reads nothing back', async t => {
    const { app, url, metricsUrl } = await start(t)
    // ≥ 5 MiB each, so that S3 stores every append as parts.
    const data = bytes(11 * MiB + 777, 6)
    const cuts = [0, 5 * MiB + 1, 10 * MiB + 3, data.length]
    const created = await create(url, { 'upload-length': String(data.length) })
    const location = created.headers.get('location')!
    const id = location.split('/').pop()!
    for (let i = 0; i < 2; i++) t.equal((await patch(url, location, cuts[i]!, data.subarray(cuts[i], cuts[i + 1]))).res.status, 204)
    const view = (await app.state.sessions.get(id, Date.now()))!
    t.same([0, 1].map(i => view.chunks.get(i)).map(c => ({ sha256: c!.sha256, through: c!.through })),
      [0, 1].map(i => ({ sha256: '', through: sha256Of(data.subarray(0, cuts[i + 1])) })), 'no digest of its own: the SHA-256 of the upload through its last byte')
    const last = await patch(url, location, cuts[2]!, data.subarray(cuts[2]))
    t.equal(last.res.headers.get('repr-digest'), `sha-256=:${Buffer.from(sha256Of(data), 'hex').toString('base64')}:`)
    const text = await (await fetch(metricsUrl)).text()
    const of = (how: string) => Number(new RegExp(`^dropcode_session_digest_bytes_total\\{how="${how}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0)
    t.same({ folded: of('folded'), read: of('read') }, { folded: data.length, read: 0 }, 'the file\'s SHA-256 is the running one: nothing read back')
    t.equal(sha256Of((await download(url, last.res.headers.get('dropcode-code')!)).data), sha256Of(data))
  })

  t.test('tus: creation-with-upload stores the whole file in the POST; an empty upload completes at creation', async t => {
    const { url } = await start(t)
    const data = bytes(200_000, 4)
    const created = await create(url, { 'upload-length': String(data.length), 'upload-metadata': metadata({ name: 'from-uppy.bin' }) }, data)
    t.equal(created.status, 201)
    t.equal(created.headers.get('upload-offset'), String(data.length))
    const code = created.headers.get('dropcode-code')!
    const got = await download(url, code)
    t.equal(sha256Of(got.data), sha256Of(data))
    t.match(got.disposition, /from-uppy\.bin/, 'Uppy\'s `name` is the filename when `filename` is absent')
    const empty = await create(url, { 'upload-length': '0' })
    t.equal(empty.status, 201)
    const emptyCode = empty.headers.get('dropcode-code')
    t.match(emptyCode, /^[A-Za-z0-9]{6}$/)
    t.equal((await download(url, emptyCode!)).data.length, 0)
  })

  t.test('tus: creation-defer-length: the length comes with a later append', async t => {
    const { url } = await start(t)
    const data = bytes(700_000, 5)
    const created = await create(url, { 'upload-defer-length': '1' })
    const location = created.headers.get('location')!
    t.equal((await patch(url, location, 0, data.subarray(0, 300_000))).res.status, 204)
    const during = await head(url, location)
    t.equal(during.headers.get('upload-defer-length'), '1')
    t.equal(during.headers.get('upload-length'), null)
    const tooShort = await patch(url, location, 300_000, new Uint8Array(0), { 'upload-length': '10' })
    t.equal(tooShort.res.status, 400, 'a length under what is stored')
    const last = await patch(url, location, 300_000, data.subarray(300_000), { 'upload-length': String(data.length) })
    t.equal(last.res.status, 204)
    t.equal(sha256Of((await download(url, last.res.headers.get('dropcode-code')!)).data), sha256Of(data))
    const neither = await create(url, {})
    t.equal(neither.status, 400, 'neither Upload-Length nor Upload-Defer-Length')
  })

  t.test('tus: refusals: wrong offset 409 with the offset, wrong type 415, past the length 413 keeping nothing, bad metadata 400, over the size limit 413, another key 404', async t => {
    const { url, config } = await start(t)
    const created = await create(url, { 'upload-length': '1000' })
    const location = created.headers.get('location')!
    await patch(url, location, 0, bytes(100, 1))
    const wrong = await patch(url, location, 50, bytes(10, 1))
    t.equal(wrong.res.status, 409)
    t.equal(wrong.res.headers.get('upload-offset'), '100', 'where the upload ends')
    t.equal(wrong.body.code, 'DROPCODE_OFFSET_MISMATCH')
    const type = await fetch(`${url}${location}`, { method: 'PATCH', headers: { ...TUS, 'content-type': 'application/octet-stream', 'upload-offset': '100' }, body: bytes(10, 1) })
    t.equal(type.status, 415)
    t.equal((await type.json() as { code: string }).code, 'DROPCODE_UNSUPPORTED_MEDIA_TYPE')
    const past = await patch(url, location, 100, bytes(901, 1))
    t.equal(past.res.status, 413)
    t.equal((await head(url, location)).headers.get('upload-offset'), '100', 'nothing of the refused append was kept')
    const badMeta = await create(url, { 'upload-length': '10', 'upload-metadata': 'filename not base64!' })
    t.equal(badMeta.status, 400)
    const badDownloads = await fetch(`${url}/files/`, { method: 'POST', headers: { ...TUS, 'upload-length': '10', 'upload-metadata': metadata({ max_downloads: '0' }) } })
    t.equal(badDownloads.status, 400)
    t.match(await badDownloads.json(), { code: 'DROPCODE_INVALID_FIELD', error: /max_downloads/ }, 'the same JSON body as the form field\'s')
    const big = await create(url, { 'upload-length': String(config.limits.maxFileSize + 1) })
    t.equal(big.status, 413)
    t.equal((await head(url, location, 'another-key-0123456789')).status, 401)
    t.equal((await head(url, '/files/AAAAAAAAAAAAAAAAAAAAAA')).status, 404)
  })

  t.test('tus: checksum: a matching append is kept, a mismatch is 460 and keeps nothing, an unknown algorithm 400', async t => {
    const { url } = await start(t)
    const data = bytes(2 * MiB, 6)
    const location = (await create(url, { 'upload-length': String(data.length) })).headers.get('location')!
    const digest = (alg: string, d: Buffer) => `${alg} ${createHash(alg).update(d).digest('base64')}`
    const ok = await patch(url, location, 0, data.subarray(0, MiB), { 'upload-checksum': digest('sha1', data.subarray(0, MiB)) })
    t.equal(ok.res.status, 204)
    const bad = await patch(url, location, MiB, data.subarray(MiB), { 'upload-checksum': digest('sha256', data.subarray(0, MiB)) })
    t.equal(bad.res.status, 460)
    t.equal(bad.body.code, 'DROPCODE_CHECKSUM_MISMATCH')
    t.equal((await head(url, location)).headers.get('upload-offset'), String(MiB), 'the mismatched append left nothing')
    const unknown = await patch(url, location, MiB, data.subarray(MiB), { 'upload-checksum': 'crc32 AAAA' })
    t.equal(unknown.res.status, 400)
    const done = await patch(url, location, MiB, data.subarray(MiB), { 'upload-checksum': digest('sha256', data.subarray(MiB)) })
    t.equal(done.res.status, 204)
    t.equal(sha256Of((await download(url, done.res.headers.get('dropcode-code')!)).data), sha256Of(data))
  })

  t.test('tus: termination removes the upload and everything it stored; X-HTTP-Method-Override works', async t => {
    const { url, config } = await start(t)
    const location = (await create(url, { 'upload-length': String(8 * MiB) })).headers.get('location')!
    // Over a part on S3 (5 MiB in the tests) and a tail shorter than one.
    const viaPost = await fetch(`${url}${location}`, { method: 'POST', headers: { ...TUS, 'x-http-method-override': 'PATCH', 'content-type': 'application/offset+octet-stream', 'upload-offset': '0' }, body: bytes(6 * MiB, 7) })
    t.equal(viaPost.status, 204, 'a POST overridden to PATCH appends')
    t.equal(viaPost.headers.get('upload-offset'), String(6 * MiB))
    const asHead = await fetch(`${url}${location}`, { method: 'POST', headers: { ...TUS, 'x-http-method-override': 'HEAD' } })
    t.equal(asHead.headers.get('upload-offset'), String(6 * MiB), 'and to HEAD reports')
    t.not((await listStored(config)).length, 0)
    const del = await fetch(`${url}${location}`, { method: 'DELETE', headers: TUS })
    t.equal(del.status, 204)
    t.equal((await head(url, location)).status, 404, 'a terminated upload is gone')
    t.same(await listStored(config), [], 'nothing is left in storage (objects, tails, unfinished multipart uploads)')
    t.equal((await fetch(`${url}${location}`, { method: 'DELETE', headers: TUS })).status, 404)
  })

  t.test('tus: an append cut midway keeps what arrived; another instance resumes it from HEAD\'s offset and the file is exact', async t => {
    const env = testEnv(t, pair, backends, { MAX_FILE_SIZE: String(64 * MiB) })
    const a = await startApp(t, loadConfig(env))
    const b = await startApp(t, loadConfig(env))
    const data = bytes(14 * MiB + 3, 8)
    const location = (await create(a.url, { 'upload-length': String(data.length) })).headers.get('location')!
    // 7 MiB of a declared 14 MiB, then the client goes: on S3 a part of 5 MiB and a 2 MiB tail.
    await cutPatch(a.url, location, 0, data.subarray(0, 7 * MiB), data.length)
    let offset = 0
    await eventually(async () => {
      offset = Number((await head(b.url, location)).headers.get('upload-offset'))
      if (offset !== 7 * MiB) throw new Error(`offset ${offset}`)
    }, 10_000)
    t.equal(offset, 7 * MiB, 'HEAD on the other instance reports every byte that arrived')
    await cutPatch(b.url, location, offset, data.subarray(offset, offset + MiB), data.length - offset)
    await eventually(async () => {
      offset = Number((await head(a.url, location)).headers.get('upload-offset'))
      if (offset !== 8 * MiB) throw new Error(`offset ${offset}`)
    }, 10_000)
    const last = await patch(a.url, location, offset, data.subarray(offset))
    t.equal(last.res.status, 204)
    const got = await download(b.url, last.res.headers.get('dropcode-code')!)
    t.equal(got.data.length, data.length)
    t.equal(sha256Of(got.data), sha256Of(data), 'byte for byte what was sent, across two cuts and two instances')
  })

  t.test('tus: concatenation: partial uploads fill in parallel on two instances, in any order; the final completes at its creation with the code', async t => {
    const env = testEnv(t, pair, backends, { MAX_FILE_SIZE: String(64 * MiB) })
    const a = await startApp(t, loadConfig(env))
    const b = await startApp(t, loadConfig(env))
    // Partials of 6, 6 and 1 MiB (S3: copied inside the bucket), then 6, 1 and 6 MiB (a short
    // partial in the middle cannot be an S3 part: streamed through once).
    for (const sizes of [[6 * MiB, 6 * MiB, MiB + 5], [6 * MiB, MiB, 6 * MiB]]) {
      const data = bytes(sizes.reduce((n, x) => n + x, 0), sizes[1]!)
      const parts: Buffer[] = []
      for (let at = 0, i = 0; i < sizes.length; at += sizes[i]!, i++) parts.push(data.subarray(at, at + sizes[i]!))
      const locations: string[] = []
      for (const part of parts) {
        const created = await create(a.url, { 'upload-length': String(part.length), 'upload-concat': 'partial' })
        t.equal(created.status, 201)
        locations.push(created.headers.get('location')!)
      }
      t.equal((await head(b.url, locations[0]!)).headers.get('upload-concat'), 'partial')
      // In reverse order, alternating instances, all at once, each in two appends.
      await Promise.all([...parts.keys()].reverse().map(async i => {
        const [first, second] = i % 2 === 0 ? [a, b] : [b, a]
        const half = Math.floor(parts[i]!.length / 2)
        t.equal((await patch(first.url, locations[i]!, 0, parts[i]!.subarray(0, half))).res.status, 204)
        const done = await patch(second.url, locations[i]!, half, parts[i]!.subarray(half))
        t.equal(done.res.status, 204)
        t.equal(done.res.headers.get('dropcode-code'), null, 'a partial upload is never published by itself')
      }))
      const records = await Promise.all(locations.map(async l => [...(await a.app.state.sessions.get(l.split('/').pop()!, Date.now()))!.chunks.values()]))
      t.same(records.flat().map(c => [c.sha256, c.through]), records.flat().map(() => ['', undefined]), 'a partial\'s appends are not hashed: its final hashes their bytes once, in order')
      const final = await create(b.url, { 'upload-concat': `final;${locations[0]!} ${a.url}${locations[1]!} ${locations[2]!}`, 'upload-metadata': metadata({ filename: 'joined.bin' }) })
      t.equal(final.status, 201)
      const code = final.headers.get('dropcode-code')
      t.match(code, /^[A-Za-z0-9]{6}$/, 'the final upload answers the code at its creation')
      t.equal(final.headers.get('upload-offset'), String(data.length))
      t.match(final.headers.get('location'), /^\/files\/[A-Za-z0-9_-]{22}$/)
      t.equal((await head(a.url, final.headers.get('location')!)).headers.get('dropcode-code'), code, 'HEAD of the final answers it')
      t.equal((await head(a.url, locations[1]!)).headers.get('dropcode-code'), code, 'and so does HEAD of a partial')
      const got = await download(a.url, code!)
      t.equal(sha256Of(got.data), sha256Of(data), `byte for byte (${sizes.join(' + ')} bytes)`)
      t.match(got.disposition, /joined\.bin/)
      const again = await create(a.url, { 'upload-concat': `final;${locations.join(' ')}` })
      t.equal(again.status, 400, 'partials used by a final cannot be used again')
    }
    // What is left: at most the two files (kept for a cut download's resume window), whole.
    const left = (await listStored(a.config)).map(item => describeStored(a.config, item))
    t.ok(new Set(left.map(item => item.key)).size <= 2 && left.every(item => item.kind === 'object'), `the partials' storage is gone: ${JSON.stringify(left)}`)
  })

  t.test('tus: concatenation refusals: an unfinished partial, an upload that is not partial, a length on the final', async t => {
    const { url } = await start(t)
    const partial = (await create(url, { 'upload-length': '100', 'upload-concat': 'partial' })).headers.get('location')!
    await patch(url, partial, 0, bytes(50, 1))
    const unfinished = await fetch(`${url}/files/`, { method: 'POST', headers: { ...TUS, 'upload-concat': `final;${partial}` } })
    t.equal(unfinished.status, 400)
    t.match(await unfinished.json(), { code: 'DROPCODE_INVALID_FIELD', error: /holds 50 of its 100 bytes/ })
    await patch(url, partial, 50, bytes(50, 2))
    const plain = (await create(url, { 'upload-length': '10' })).headers.get('location')!
    await patch(url, plain, 0, bytes(5, 1))
    const notPartial = await fetch(`${url}/files/`, { method: 'POST', headers: { ...TUS, 'upload-concat': `final;${partial} ${plain}` } })
    t.equal(notPartial.status, 400)
    t.match(await notPartial.json(), { error: /not created with Upload-Concat: partial/ })
    t.equal((await create(url, { 'upload-concat': `final;${partial}`, 'upload-length': '100' })).status, 400)
    t.equal((await create(url, { 'upload-concat': 'final;' })).status, 400)
    const ok = await create(url, { 'upload-concat': `final;${partial}` })
    t.equal(ok.status, 201, 'the refusals left the finished partial usable')
  })

  t.test('tus: an abandoned upload expires (HEAD 404) and the sweeper removes all it stored: parts, tail objects, the unfinished multipart upload', async t => {
    const running = await start(t, { SESSION_TTL_SECONDS: '1', SWEEP_GRACE_SECONDS: '0' })
    const { url } = running
    const location = (await create(url, { 'upload-length': String(20 * MiB) })).headers.get('location')!
    await patch(url, location, 0, bytes(6 * MiB, 1))
    await patch(url, location, 6 * MiB, bytes(MiB, 2)) // S3: a tail object
    const partial = (await create(url, { 'upload-length': String(MiB), 'upload-concat': 'partial' })).headers.get('location')!
    await patch(url, partial, 0, bytes(MiB, 3))
    t.not((await listStored(running.config)).length, 0, 'bytes are stored')
    await new Promise(resolve => setTimeout(resolve, 1300))
    t.equal((await head(url, location)).status, 404, 'expired')
    t.same(await running.app.sweeper.sweepOnce(), { deleted: 2, failed: 0 })
    t.same(await listStored(running.config), [], 'nothing left')
  })

  t.test('tus: a key\'s uploads_per_minute counts a file once, its partial uploads not at all', async t => {
    const { url } = await start(t)
    const made = await fetch(`${url}/admin/keys`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'one-a-minute', uploads_per_minute: 1 }) })
    const { secret } = await made.json() as { secret: string }
    const as = { 'x-client-key': secret }
    const partials: string[] = []
    for (let i = 0; i < 3; i++) {
      const p = await create(url, { ...as, 'upload-length': '10', 'upload-concat': 'partial' })
      t.equal(p.status, 201, `partial ${i}`)
      partials.push(p.headers.get('location')!)
      await patch(url, partials[i]!, 0, bytes(10, i), as)
    }
    const final = await create(url, { ...as, 'upload-concat': `final;${partials.join(' ')}` })
    t.equal(final.status, 201, 'the final is the key\'s one upload of the minute')
    const next = await create(url, { ...as, 'upload-length': '10' })
    t.equal(next.status, 429, 'a second file in the minute is refused')
    t.ok(Number(next.headers.get('retry-after')) >= 1)
  })

  t.test('tus: a second append while one streams is 423 with Retry-After', async t => {
    const { url } = await start(t)
    const location = (await create(url, { 'upload-length': String(2 * MiB) })).headers.get('location')!
    const { port } = new URL(url)
    const slow = net.connect(Number(port), '127.0.0.1')
    slow.on('error', () => {})
    await new Promise<void>(resolve => slow.once('connect', resolve))
    slow.write(`PATCH ${location} HTTP/1.1\r\nhost: 127.0.0.1\r\ntus-resumable: 1.0.0\r\nx-client-key: ${API_KEY}\r\ncontent-type: application/offset+octet-stream\r\nupload-offset: 0\r\ncontent-length: ${2 * MiB}\r\n\r\n`)
    slow.write(bytes(1000, 1))
    t.teardown(() => { slow.destroy() })
    let answered = ''
    slow.on('data', data => { answered += String(data) })
    // Time for it to take the upload's lock (an empty append that came first would take it).
    await new Promise(resolve => setTimeout(resolve, 500))
    t.equal(answered, '', 'the slow append is still streaming')
    let second!: Awaited<ReturnType<typeof patch>>
    // Empty appends until one meets the lock: one that comes first takes and records nothing.
    await eventually(async () => {
      second = await patch(url, location, 0, new Uint8Array(0))
      if (second.res.status !== 423) throw new Error(`status ${second.res.status}`)
    })
    t.equal(second.res.status, 423)
    t.ok(Number(second.res.headers.get('retry-after')) >= 1, 'Retry-After: the lease left')
    t.equal(second.body.code, 'DROPCODE_UPLOAD_LOCKED')
  })
}
