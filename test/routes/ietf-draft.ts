/**
 * The IETF resumable-upload draft on /files/ (src/routes/ietf-draft.ts) through real HTTP, in each
 * interop version dropcode speaks (5: draft -03, 6: drafts -04/-05, 8: drafts -09 to -11 and the
 * editors' copy after), with requests shaped as the drafts' own examples; run once per driver
 * pair (ietf-draft-fs.test.ts, ietf-draft-s3.test.ts).
 */
import http from 'node:http'
import net from 'node:net'
import type { Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { API_KEY, eventually, startApp, testEnv, type Backends, type DriverPair } from '../helpers/app.js'
import { listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const MiB = 1024 * 1024
const VERSIONS = [5, 6, 8] as const
const PROBLEMS = 'https://iana.org/assignments/http-problem-types#'

const draft = (v: number, extra: Record<string, string> = {}) => ({ 'upload-draft-interop-version': String(v), 'x-client-key': API_KEY, ...extra })
/** An append's content type: none in draft -03's examples, application/partial-upload from interop version 6. */
const partial = (v: number): Record<string, string> => v >= 6 ? { 'content-type': 'application/partial-upload' } : {}

async function send (url: string, path: string, method: string, headers: Record<string, string>, body?: Uint8Array) {
  const res = await fetch(`${url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) })
  const text = await res.text()
  return { res, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

async function download (url: string, code: string) {
  const res = await fetch(`${url}/download/${code}`)
  return { status: res.status, data: Buffer.from(await res.arrayBuffer()), disposition: res.headers.get('content-disposition') }
}

/** A request over a raw socket that sends `data` of the `declared` bytes and is then cut. */
async function cut (url: string, head: string, data: Buffer, declared: number): Promise<void> {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
  socket.on('error', () => {})
  await new Promise<void>(resolve => socket.once('connect', resolve))
  socket.write(`${head}\r\nhost: 127.0.0.1\r\nx-client-key: ${API_KEY}\r\ncontent-length: ${declared}\r\n\r\n`)
  await new Promise<void>(resolve => socket.write(data, () => resolve()))
  await new Promise(resolve => setTimeout(resolve, 500))
  socket.destroy()
}

export function ietfDraftSuite (t: Test, pair: DriverPair, backends: Backends) {
  const start = async (t: Test) => await startApp(t, loadConfig(testEnv(t, pair, backends, { MAX_FILE_SIZE: String(64 * MiB) })))

  for (const v of VERSIONS) {
    t.test(`draft interop ${v}: creation with the whole body (Upload-Complete: ?1) answers the code; no Tus-Resumable needed`, async t => {
      const { url } = await start(t)
      const data = bytes(3 * MiB + 5, 40 + v)
      const { res, body } = await send(url, '/files/', 'POST', draft(v, { 'upload-complete': '?1', 'content-disposition': 'inline; filename="file name.jpg"; filename*=UTF-8\'\'f%C3%BCr%20dich.jpg' }), data)
      t.equal(res.status, 201)
      t.match(res.headers.get('location'), /^\/files\/[A-Za-z0-9_-]{22}$/)
      t.equal(res.headers.get('upload-complete'), '?1')
      t.equal(res.headers.get('upload-offset'), String(data.length))
      t.equal(res.headers.get('tus-resumable'), null, 'a draft answer is no tus answer')
      const code = res.headers.get('dropcode-code')!
      t.match(code, /^[A-Za-z0-9]{6}$/)
      t.same(body, { code }, 'and the code in the body')
      const got = await download(url, code)
      t.equal(sha256Of(got.data), sha256Of(data))
      t.match(got.disposition, /f%C3%BCr%20dich\.jpg/, 'the name from Content-Disposition (filename* first)')
      const again = await send(url, res.headers.get('location')!, 'HEAD', draft(v))
      t.equal(again.res.status, 204)
      t.equal(again.res.headers.get('upload-complete'), '?1')
      t.equal(again.res.headers.get('dropcode-code'), code, 'HEAD afterwards says the code too')
    })

    t.test(`draft interop ${v}: creation with part (?0), HEAD's offset, PATCH the rest with ?1: the code, the download exact`, async t => {
      const { url } = await start(t)
      const data = bytes(7 * MiB + 11, 50 + v)
      const first = 6 * MiB
      const created = await send(url, '/files/', 'POST', draft(v, { 'upload-complete': '?0', ...(v >= 6 ? { 'upload-length': String(data.length) } : {}), 'upload-metadata': `filename ${Buffer.from('part.bin').toString('base64')}` }), data.subarray(0, first))
      t.equal(created.res.status, 201)
      t.equal(created.res.headers.get('upload-complete'), '?0')
      t.equal(created.res.headers.get('upload-offset'), String(first))
      t.equal(created.res.headers.get('dropcode-code'), null)
      if (v === 6) t.match(created.res.headers.get('upload-limit'), new RegExp(`^max-size=${64 * MiB}, expires=\\d+$`))
      if (v === 8) t.match(created.res.headers.get('upload-limit'), new RegExp(`^max-size=${64 * MiB}, max-age=\\d+$`))
      if (v === 5) t.equal(created.res.headers.get('upload-limit'), null, 'draft -03 has no Upload-Limit')
      const location = created.res.headers.get('location')!
      const stands = await send(url, location, 'HEAD', draft(v))
      t.equal(stands.res.status, 204)
      t.equal(stands.res.headers.get('upload-offset'), String(first))
      t.equal(stands.res.headers.get('upload-complete'), '?0')
      t.equal(stands.res.headers.get('cache-control'), 'no-store')
      if (v >= 6) t.equal(stands.res.headers.get('upload-length'), String(data.length))
      const rest = await send(url, location, 'PATCH', draft(v, { 'upload-complete': '?1', 'upload-offset': String(first), ...partial(v) }), data.subarray(first))
      t.equal(rest.res.status, v < 8 ? 201 : 200)
      t.equal(rest.res.headers.get('upload-complete'), '?1')
      t.equal(rest.res.headers.get('upload-offset'), String(data.length))
      const code = rest.res.headers.get('dropcode-code')!
      t.same(rest.body, { code })
      const got = await download(url, code)
      t.equal(sha256Of(got.data), sha256Of(data), 'byte for byte')
      t.match(got.disposition, /part\.bin/, 'the name from Upload-Metadata')
    })

    t.test(`draft interop ${v}: an offset mismatch is 409 problem+json with the offset; DELETE cancels and the upload is gone`, async t => {
      const { url, config } = await start(t)
      const created = await send(url, '/files/', 'POST', draft(v, { 'upload-complete': '?0' }), bytes(100, 60))
      const location = created.res.headers.get('location')!
      const wrong = await send(url, location, 'PATCH', draft(v, { 'upload-complete': '?0', 'upload-offset': '25', ...partial(v) }), bytes(10, 61))
      t.equal(wrong.res.status, 409)
      t.equal(wrong.res.headers.get('content-type'), 'application/problem+json; charset=utf-8')
      t.equal(wrong.res.headers.get('upload-offset'), '100')
      t.equal(wrong.res.headers.get('upload-complete'), '?0')
      t.equal(wrong.res.headers.get('dropcode-error'), 'DROPCODE_OFFSET_MISMATCH')
      t.match(wrong.body, { status: 409, code: 'DROPCODE_OFFSET_MISMATCH' })
      if (v >= 6) t.match(wrong.body, { type: `${PROBLEMS}mismatching-upload-offset`, 'expected-offset': 100, 'provided-offset': 25 })
      else t.match(wrong.body, { type: 'about:blank' }, 'draft -03 defines no problem types')
      const appended = await send(url, location, 'PATCH', draft(v, { 'upload-complete': '?0', 'upload-offset': '100', ...partial(v) }), bytes(10, 62))
      t.equal(appended.res.status, v < 8 ? 201 : 204)
      t.equal(appended.res.headers.get('upload-offset'), '110')
      const del = await send(url, location, 'DELETE', draft(v))
      t.equal(del.res.status, 204)
      const gone = await send(url, location, 'HEAD', draft(v))
      t.equal(gone.res.status, 404)
      t.equal(gone.res.headers.get('dropcode-error'), 'DROPCODE_SESSION_NOT_FOUND')
      t.same(await listStored(config), [], 'nothing is left in storage')
    })

    t.test(`draft interop ${v}: a cut creation keeps what arrived; a cut append too; the upload resumes from HEAD and the file is exact`, async t => {
      const { url } = await start(t)
      const data = bytes(9 * MiB + 1, 70 + v)
      // A creation cannot be resumed without its Location (no 104 on Node 20): learn it first with
      // an empty ?0 creation (the draft's careful upload creation), then cut an append.
      const created = await send(url, '/files/', 'POST', draft(v, { 'upload-complete': '?0' }))
      const location = created.res.headers.get('location')!
      t.equal(created.res.headers.get('upload-offset'), '0')
      const type = v >= 6 ? '\r\ncontent-type: application/partial-upload' : ''
      await cut(url, `PATCH ${location} HTTP/1.1\r\nupload-draft-interop-version: ${v}\r\nupload-complete: ?1\r\nupload-offset: 0${type}`, data.subarray(0, 6 * MiB), data.length)
      let offset = 0
      await eventually(async () => {
        offset = Number((await send(url, location, 'HEAD', draft(v))).res.headers.get('upload-offset'))
        if (offset < 5 * MiB) throw new Error(`offset ${offset}`)
      }, 10_000)
      t.ok(offset >= 5 * MiB && offset <= 6 * MiB, `the cut append kept what arrived (${offset} bytes)`)
      const stands = await send(url, location, 'HEAD', draft(v))
      t.equal(stands.res.headers.get('upload-complete'), '?0', 'a cut ?1 append does not complete the upload')
      const rest = await send(url, location, 'PATCH', draft(v, { 'upload-complete': '?1', 'upload-offset': String(offset), ...partial(v) }), data.subarray(offset))
      t.equal(rest.res.headers.get('upload-complete'), '?1', JSON.stringify(rest.body))
      t.equal(sha256Of((await download(url, rest.res.headers.get('dropcode-code')!)).data), sha256Of(data))
    })
  }

  t.test('draft: a creation with content gets one 104 with its Location where Node can send it (writeInformation), else none; a cut one keeps what arrived', async t => {
    const { url } = await start(t)
    const informs = typeof (http.ServerResponse.prototype as { writeInformation?: unknown }).writeInformation === 'function'
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    let received = ''
    socket.on('data', chunk => { received += chunk.toString('latin1') })
    await new Promise<void>(resolve => socket.once('connect', resolve))
    const data = bytes(2 * MiB, 90)
    socket.write(`POST /files/ HTTP/1.1\r\nhost: 127.0.0.1\r\nx-client-key: ${API_KEY}\r\nupload-draft-interop-version: 8\r\nupload-complete: ?1\r\ncontent-length: ${data.length * 2}\r\n\r\n`)
    socket.write(data)
    await eventually(async () => { if (informs && !received.includes('\r\n\r\n')) throw new Error('no interim answer yet') })
    await new Promise(resolve => setTimeout(resolve, 300))
    socket.destroy()
    if (!informs) {
      t.equal(received, '', `${process.version} has no writeInformation: nothing before the final answer`)
      return
    }
    const interim = /^HTTP\/1\.1 104 [^\r]*\r\n([\s\S]*?)\r\n\r\n/.exec(received)
    t.ok(interim, 'a 104 first')
    const location = /\r\nlocation: (\S+)/i.exec(`\r\n${interim![1]!}`)?.[1]
    t.match(location, /^\/files\/[A-Za-z0-9_-]{22}$/)
    t.match(interim![1], /upload-draft-interop-version: 8/i)
    t.match(interim![1], new RegExp(`upload-limit: max-size=${64 * MiB}, max-age=\\d+`, 'i'))
    let offset = 0
    await eventually(async () => {
      offset = Number((await send(url, location!, 'HEAD', draft(8))).res.headers.get('upload-offset'))
      if (offset === 0) throw new Error('offset 0')
    }, 10_000)
    t.ok(offset > 0 && offset <= data.length, `the cut creation kept what arrived (${offset} bytes), resumable from the 104's Location`)
  })

  t.test('draft interop 6 and 8: an append must be application/partial-upload (415 problem+json); draft -03 takes any type', async t => {
    const { url } = await start(t)
    for (const v of VERSIONS) {
      const location = (await send(url, '/files/', 'POST', draft(v, { 'upload-complete': '?0' }))).res.headers.get('location')!
      const wrong = await send(url, location, 'PATCH', draft(v, { 'upload-complete': '?0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }), bytes(10, 80))
      if (v >= 6) {
        t.equal(wrong.res.status, 415, `interop ${v}`)
        t.match(wrong.body, { type: 'about:blank', code: 'DROPCODE_UNSUPPORTED_MEDIA_TYPE', detail: /application\/partial-upload/ })
      } else {
        t.equal(wrong.res.status, 201, 'interop 5 appends whatever the type')
      }
    }
  })

  t.test('draft: inconsistent lengths are 400 problem+json (inconsistent-upload-length in interop 8); a completed upload refuses appends in interop 6, replays in 8', async t => {
    const { url } = await start(t)
    const mixed = await send(url, '/files/', 'POST', draft(8, { 'upload-complete': '?1', 'upload-length': '99' }), bytes(10, 81))
    t.equal(mixed.res.status, 400)
    t.match(mixed.body, { type: `${PROBLEMS}inconsistent-upload-length`, code: 'DROPCODE_INVALID_FIELD' })
    const location = (await send(url, '/files/', 'POST', draft(8, { 'upload-complete': '?0', 'upload-length': '20' }), bytes(10, 82))).res.headers.get('location')!
    const other = await send(url, location, 'PATCH', draft(8, { 'upload-complete': '?1', 'upload-offset': '10', ...partial(8) }), bytes(5, 83))
    t.equal(other.res.status, 400, 'the rest (5 bytes) does not make the 20 announced')
    t.match(other.body, { type: `${PROBLEMS}inconsistent-upload-length` })
    const done = await send(url, '/files/', 'POST', draft(6, { 'upload-complete': '?1' }), bytes(10, 84))
    const doneAt = done.res.headers.get('location')!
    const refused = await send(url, doneAt, 'PATCH', draft(6, { 'upload-complete': '?1', 'upload-offset': '10', ...partial(6) }))
    t.equal(refused.res.status, 400)
    t.match(refused.body, { type: `${PROBLEMS}completed-upload` })
    const replay = await send(url, doneAt, 'PATCH', draft(8, { 'upload-complete': '?1', 'upload-offset': '10', ...partial(8) }))
    t.equal(replay.res.status, 200, 'interop 8: the lost final answer, again')
    t.equal(replay.res.headers.get('dropcode-code'), done.res.headers.get('dropcode-code'))
  })

  t.test('draft: OPTIONS advertises Upload-Limit; an unknown interop version is 412 naming the supported ones; -03/-05 refuse upload state on HEAD', async t => {
    const { url } = await start(t)
    const options = await fetch(`${url}/files/`, { method: 'OPTIONS' })
    t.equal(options.headers.get('upload-limit'), `max-size=${64 * MiB}`)
    const unknown = await send(url, '/files/', 'POST', draft(7, { 'upload-complete': '?1' }), bytes(3, 85))
    t.equal(unknown.res.status, 412)
    t.match(unknown.body, { code: 'DROPCODE_TUS_VERSION', error: /5, 6, 8/ })
    const location = (await send(url, '/files/', 'POST', draft(6, { 'upload-complete': '?0' }))).res.headers.get('location')!
    const bad = await send(url, location, 'HEAD', draft(6, { 'upload-offset': '0' }))
    t.equal(bad.res.status, 400)
    const noKey = await send(url, '/files/', 'POST', { 'upload-draft-interop-version': '8', 'upload-complete': '?1' }, bytes(3, 86))
    t.equal(noKey.res.status, 401, 'the API key is required as everywhere')
    t.equal(noKey.res.headers.get('content-type'), 'application/problem+json; charset=utf-8')
    t.match(noKey.body, { code: 'DROPCODE_UNAUTHORIZED', status: 401 })
  })
}
