/**
 * The single-file flow through real HTTP, run once per driver pair (fs-local.test.ts,
 * s3-redis.test.ts): upload, download, delete, and the interface's errors.
 */
import http from 'node:http'
import net from 'node:net'
import type { Test } from 'tap'
import type { AppOverrides } from '../../src/app.js'
import { API_KEY, eventually, form, rawMultipart, startApp, testConfig, upload, type Backends, type DriverPair } from '../helpers/app.js'
import { listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const HOUR = 3_600_000

export function singleFileSuite (t: Test, pair: DriverPair, backends: Backends) {
  const start = (t: Test, env: Record<string, string> = {}, overrides: AppOverrides = {}) =>
    startApp(t, testConfig(t, pair, backends, env), overrides)

  /** Nothing in storage and nothing awaiting cleanup (waiting briefly for after-response work). */
  async function assertClean (t: Test, app: Awaited<ReturnType<typeof start>>) {
    let stored: string[] = []
    let due = 0
    await eventually(async () => {
      stored = await listStored(app.config)
      due = await app.app.state.cleanup.countDue(Number.MAX_SAFE_INTEGER)
      if (stored.length > 0 || due > 0) throw new Error('not clean yet')
    }).catch(() => {})
    t.same(stored, [], 'storage holds nothing')
    t.equal(due, 0, 'cleanup index is empty')
  }

  t.test('upload then download: exact bytes and safe headers', async t => {
    const { url } = await start(t)
    const data = bytes(300_000)
    const up = await upload(url, [['file', { data, filename: 'report.txt' }]])
    t.equal(up.status, 200)
    t.match(up.body.code, /^[A-Za-z0-9]{6}$/)
    const res = await fetch(`${url}/download/${up.body.code}`)
    t.equal(res.status, 200)
    t.equal(sha256Of(new Uint8Array(await res.arrayBuffer())), sha256Of(data))
    t.equal(res.headers.get('content-length'), '300000')
    t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8')
    t.equal(res.headers.get('content-disposition'), 'attachment; filename="report.txt"')
    t.equal(res.headers.get('x-content-type-options'), 'nosniff')
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.match(res.headers.get('content-security-policy'), /sandbox/)
  })

  t.test('HEAD and GET say the downloads left and the expiry (Dropcode-Downloads-Left, Dropcode-Expires); HEAD counts nothing', async t => {
    const now = Date.now()
    const { url } = await start(t, {}, { now: () => now })
    const up = await upload(url, [['file', { data: 'abc' }], ['max_downloads', '3'], ['expiry_hours', '5']])
    for (let i = 0; i < 2; i++) {
      const head = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
      t.equal(head.headers.get('dropcode-downloads-left'), '3')
      t.equal(head.headers.get('dropcode-expires'), new Date(now + 5 * 3_600_000).toISOString())
    }
    const get = await fetch(`${url}/download/${up.body.code}`)
    await get.arrayBuffer()
    t.equal(get.headers.get('dropcode-downloads-left'), '2', 'besides the one being sent')
    const last = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
    t.equal(last.headers.get('dropcode-downloads-left'), '2')
  })

  t.test('the default is one download; the object is deleted after it', async t => {
    const running = await start(t)
    const up = await upload(running.url, [['file', { data: 'once' }]])
    const first = await fetch(`${running.url}/download/${up.body.code}`)
    t.equal(await first.text(), 'once')
    const second = await fetch(`${running.url}/download/${up.body.code}`)
    t.equal(second.status, 404)
    t.match(second.headers.get('content-type'), /^text\/html/)
    await t.resolveMatch(second.text(), /File not available/)
    await assertClean(t, running)
  })

  t.test('fields may come before or after the file', async t => {
    const { url } = await start(t)
    const after = await upload(url, [['file', { data: 'a' }], ['max_downloads', '2'], ['expiry_hours', '3']])
    const before = await upload(url, [['max_downloads', '2'], ['file', { data: 'b' }]])
    for (const up of [after, before]) {
      t.equal(up.status, 200)
      const statuses = []
      for (let i = 0; i < 3; i++) statuses.push((await fetch(`${url}/download/${up.body.code}`)).status)
      t.same(statuses, [200, 200, 404])
    }
  })

  t.test('an empty file is a valid file', async t => {
    const { url } = await start(t)
    const up = await upload(url, [['file', { data: new Uint8Array(0), filename: 'empty.bin' }]])
    t.equal(up.status, 200)
    const res = await fetch(`${url}/download/${up.body.code}`)
    t.equal(res.status, 200)
    t.equal(res.headers.get('content-length'), '0')
    t.equal((await res.arrayBuffer()).byteLength, 0)
  })

  t.test('invalid max_downloads / expiry_hours: 400 and nothing stored', async t => {
    const running = await start(t, { MAX_DOWNLOADS: '10', MAX_EXPIRY_HOURS: '48' })
    const bad: Array<[string, string]> = [
      ['max_downloads', ''], ['max_downloads', '0'], ['max_downloads', '-1'], ['max_downloads', '1.5'],
      ['max_downloads', 'abc'], ['max_downloads', '01'], ['max_downloads', '11'], ['max_downloads', ' 2'],
      ['expiry_hours', '0'], ['expiry_hours', '49'], ['expiry_hours', '1e3'], ['expiry_hours', '99999999999999999999']
    ]
    for (const [name, value] of bad) {
      for (const order of ['before', 'after']) {
        const entries: Parameters<typeof form>[0] = order === 'before'
          ? [[name, value], ['file', { data: 'x' }]]
          : [['file', { data: 'x' }], [name, value]]
        const up = await upload(running.url, entries)
        t.equal(up.status, 400, `${name}=${JSON.stringify(value)} ${order} the file`)
        t.equal(up.body.code, 'DROPCODE_INVALID_FIELD')
        t.type(up.body.error, 'string')
      }
    }
    t.equal((await upload(running.url, [['file', { data: 'x' }], ['max_downloads', '10'], ['expiry_hours', '48']])).status, 200, 'the bounds themselves are accepted')
    const stored = await listStored(running.config)
    t.equal(stored.length, 1, 'only the valid upload is stored')
  })

  t.test('missing, misnamed or second file, duplicate field: 400 and nothing stored', async t => {
    const running = await start(t)
    const cases: Array<[string, Parameters<typeof form>[0], string]> = [
      ['no file', [['max_downloads', '1']], 'DROPCODE_MISSING_FILE'],
      ['file sent as text', [['file', 'just text']], 'DROPCODE_MISSING_FILE'],
      ['file under another name', [['upload', { data: 'x' }]], 'DROPCODE_INVALID_FIELD'],
      ['second file', [['file', { data: 'x' }], ['file', { data: 'y' }]], 'DROPCODE_TOO_MANY_FILES'],
      ['duplicate field', [['file', { data: 'x' }], ['max_downloads', '1'], ['max_downloads', '2']], 'DROPCODE_DUPLICATE_FIELD']
    ]
    for (const [name, entries, code] of cases) {
      const up = await upload(running.url, entries)
      t.equal(up.status, 400, name)
      t.equal(up.body.code, code, name)
    }
    await assertClean(t, running)
  })

  t.test('non-multipart bodies: 400 with the JSON error body', async t => {
    const { url } = await start(t)
    for (const [type, body] of [['application/json', '{"file":"x"}'], ['text/plain', 'x'], ['application/x-www-form-urlencoded', 'file=x'], [undefined, undefined]] as const) {
      const headers: Record<string, string> = { 'x-client-key': API_KEY }
      if (type !== undefined) headers['content-type'] = type
      const res = await fetch(`${url}/upload`, { method: 'POST', headers, ...(body !== undefined ? { body } : {}) })
      t.equal(res.status, 400, String(type))
      t.same(await res.json(), { error: 'The request body must be multipart/form-data.', code: 'DROPCODE_NOT_MULTIPART' })
    }
  })

  t.test('over MAX_FILE_SIZE: 413 and nothing stored; exactly the limit is fine', async t => {
    const running = await start(t, { MAX_FILE_SIZE: '100000' })
    const over = await upload(running.url, [['file', { data: bytes(100_001) }]])
    t.equal(over.status, 413)
    t.equal(over.body.code, 'DROPCODE_FILE_TOO_LARGE')
    const big = await upload(running.url, [['file', { data: bytes(3_000_000) }]])
    t.equal(big.status, 413)
    await assertClean(t, running)
    const exact = await upload(running.url, [['file', { data: bytes(100_000) }]])
    t.equal(exact.status, 200)
  })

  t.test('API key: missing or wrong is 401 before the body is read, on every upload endpoint', async t => {
    const running = await start(t)
    for (const path of ['/upload', '/upload/start', '/upload/chunk', '/upload/verify', '/upload/complete']) {
      for (const key of [undefined, 'wrong', `${API_KEY}x`, API_KEY.slice(0, -1)]) {
        const headers: Record<string, string> = key === undefined ? {} : { 'x-client-key': key }
        const res = await fetch(`${running.url}${path}`, { method: 'POST', headers, body: form([['file', { data: 'x' }]]) })
        t.equal(res.status, 401, `${path} key=${String(key)}`)
        t.equal((await res.json() as { code: string }).code, 'DROPCODE_UNAUTHORIZED')
      }
    }
    // A large body with a bad key is refused without being stored (and without reading it all).
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${running.url}/upload`, {
        method: 'POST',
        headers: { 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(512 * 1024 * 1024) }
      }, res => { res.resume(); resolve(res.statusCode!) })
      req.on('error', reject)
      req.write('--x\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\n')
      req.write(bytes(64 * 1024))
    })
    t.equal(status, 401)
    await assertClean(t, running)
  })

  t.test('API key: an empty X-Client-Key header (nothing, or only blanks, after the colon) is 401 on every upload endpoint', async t => {
    // Raw bytes on a socket: the header is sent exactly as written, empty value and all.
    const running = await start(t)
    const { port } = new URL(running.url)
    const { body, contentType } = rawMultipart([{ name: 'upload_id', data: 'a'.repeat(22) }, { name: 'file', filename: 'f.bin', data: 'x' }])
    for (const path of ['/upload', '/upload/start', '/upload/chunk', '/upload/verify', '/upload/complete']) {
      for (const header of ['X-Client-Key:', 'X-Client-Key: ', 'x-client-key:\t ']) {
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = net.connect(Number(port), '127.0.0.1', () => {
            socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${header}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`)
            socket.write(body)
          })
          let text = ''
          socket.setEncoding('utf8')
          socket.on('data', (c: string) => { text += c })
          socket.on('end', () => resolve(text))
          socket.on('error', reject)
        })
        t.match(answer, /^HTTP\/1\.1 401 /, `${path} ${JSON.stringify(header)}`)
        t.match(answer, /"code":"DROPCODE_UNAUTHORIZED"/)
      }
    }
    await assertClean(t, running)
  })

  t.test('several API keys are valid at once (rotation)', async t => {
    const { url } = await start(t, { API_KEYS: `old-key-1234,${API_KEY}` })
    t.equal((await upload(url, [['file', { data: 'x' }]], 'old-key-1234')).status, 200)
    t.equal((await upload(url, [['file', { data: 'x' }]], API_KEY)).status, 200)
  })

  t.test('the filename is kept as its base name, safely encoded in Content-Disposition', async t => {
    const { url } = await start(t)
    const cases: Array<[string, RegExp | string]> = [
      ['../../etc/passwd', 'attachment; filename="passwd"'],
      ['C:\\Users\\me\\secret.txt', 'attachment; filename="secret.txt"'],
      ['tab\there.txt', 'attachment; filename="tabhere.txt"'],
      ['\u202Egnp.exe', 'attachment; filename="gnp.exe"'],
      ['résumé 🚀.pdf', 'attachment; filename="resume _.pdf"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9%20%F0%9F%9A%80.pdf'],
      ['back\\slash.txt', 'attachment; filename="slash.txt"']
    ]
    for (const [filename, expected] of cases) {
      const { body, contentType } = rawMultipart([{ name: 'file', filename, data: 'x' }])
      const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': contentType }, body })
      const up = { body: await res.json() as { code: string } }
      const head = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
      if (typeof expected === 'string') t.equal(head.headers.get('content-disposition'), expected, filename)
      else t.match(head.headers.get('content-disposition'), expected, filename)
    }
    // Quotes and control characters can only arrive RFC 5987-encoded (filename*=).
    const send = async (disposition: string) => {
      const { body, contentType } = rawMultipart([{ name: 'file', disposition, data: 'x' }])
      return await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': contentType }, body })
    }
    const res = await send('form-data; name="file"; filename*=UTF-8\'\'a%22b%09c.txt')
    const { code } = await res.json() as { code: string }
    const head = await fetch(`${url}/download/${code}`, { method: 'HEAD' })
    t.equal(head.headers.get('content-disposition'), 'attachment; filename="a_bc.txt"; filename*=UTF-8\'\'a%22bc.txt')
    const crlf = await send('form-data; name="file"; filename*=UTF-8\'\'a%0D%0ASet-Cookie%3A%20x%00.txt')
    t.ok(crlf.status === 200 || crlf.status === 400, `CR/LF in a filename is stored cleaned or refused (${crlf.status})`)
    if (crlf.status === 200) {
      const h = await fetch(`${url}/download/${(await crlf.json() as { code: string }).code}`, { method: 'HEAD' })
      t.equal(h.headers.get('set-cookie'), null, 'no header injected')
    }
  })

  t.test('a filename with a bidirectional override comes back without it (filename_bidi_spoof)', async t => {
    const { url } = await start(t)
    const up = await upload(url, [['file', { data: 'x', filename: 'invoice\u202efdp.exe' }]])
    const res = await fetch(`${url}/download/${up.body.code}`)
    await res.text()
    t.equal(res.headers.get('content-disposition'), 'attachment; filename="invoicefdp.exe"')
  })

  t.test('active content is never served with its own type', async t => {
    const { url } = await start(t)
    for (const name of ['page.html', 'image.svg', 'doc.pdf', 'feed.xml', 'script.js', 'noext']) {
      const up = await upload(url, [['file', { data: '<script>alert(1)</script>', filename: name }]])
      const res = await fetch(`${url}/download/${up.body.code}`)
      t.equal(res.headers.get('content-type'), 'application/octet-stream', name)
      t.equal(res.headers.get('x-content-type-options'), 'nosniff')
      await res.arrayBuffer()
    }
  })

  t.test('Range without If-Range is ignored: the whole file, 200, and the download counts', async t => {
    const { url } = await start(t)
    const up = await upload(url, [['file', { data: 'whole file' }]])
    const res = await fetch(`${url}/download/${up.body.code}`, { headers: { range: 'bytes=0-0' } })
    t.equal(res.status, 200)
    t.equal(await res.text(), 'whole file')
    t.equal((await fetch(`${url}/download/${up.body.code}`, { headers: { range: 'bytes=1-' } })).status, 404, 'no second partial read')
  })

  t.test('HEAD never consumes a download', async t => {
    const { url } = await start(t)
    const up = await upload(url, [['file', { data: 'hello' }]])
    for (let i = 0; i < 3; i++) {
      const head = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
      t.equal(head.status, 200)
      t.equal(head.headers.get('content-length'), '5')
    }
    const res = await fetch(`${url}/download/${up.body.code}`)
    t.equal(await res.text(), 'hello')
    t.equal((await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })).status, 404)
  })

  t.test('malformed and unknown codes: 404 HTML page that reflects nothing', async t => {
    const { url } = await start(t)
    for (const code of ['abc', 'ABCDEFG', 'ABC-EF', '%2F%2E%2E', '..%2F..', 'AB%00CD', '%EF%BC%A1BCDEF', 'A'.repeat(5000), 'Zz9Zz9', '<img>1']) {
      const res = await fetch(`${url}/download/${code}`)
      t.equal(res.status, 404, code.slice(0, 20))
      t.match(res.headers.get('content-type'), /^text\/html/)
      const body = await res.text()
      t.notMatch(body, /<img>|Zz9Zz9|AAAAA/, 'request not reflected')
      const del = await fetch(`${url}/delete/${code}`, { method: 'DELETE' })
      t.equal(del.status, 404)
      t.equal((await del.json() as { code: string }).code, 'DROPCODE_FILE_NOT_FOUND')
    }
  })

  t.test('delete: no key needed; the file and its object are gone; a second delete is 404', async t => {
    const running = await start(t)
    const up = await upload(running.url, [['file', { data: 'bye' }], ['max_downloads', '5']])
    const del = await fetch(`${running.url}/delete/${up.body.code}`, { method: 'DELETE' })
    t.equal(del.status, 200)
    t.match(await del.json(), { message: /deleted/ })
    t.equal((await fetch(`${running.url}/download/${up.body.code}`)).status, 404)
    const again = await fetch(`${running.url}/delete/${up.body.code}`, { method: 'DELETE' })
    t.equal(again.status, 404)
    t.match(await again.json(), { error: String, code: 'DROPCODE_FILE_NOT_FOUND' })
    await assertClean(t, running)
  })

  t.test('with max_downloads = N, exactly N of many concurrent downloads get the file', async t => {
    const { url } = await start(t)
    const data = bytes(50_000)
    const up = await upload(url, [['file', { data }], ['max_downloads', '5']])
    const results = await Promise.all(Array.from({ length: 100 }, async () => {
      const res = await fetch(`${url}/download/${up.body.code}`)
      const body = new Uint8Array(await res.arrayBuffer())
      return { status: res.status, ok: res.status === 200 && sha256Of(body) === sha256Of(data) }
    }))
    t.equal(results.filter(r => r.status === 200).length, 5)
    t.equal(results.filter(r => r.ok).length, 5, 'each served download is complete')
    t.equal(results.filter(r => r.status === 404).length, 95)
  })

  t.test('expiry: gone the moment expiry_hours pass; the sweeper removes the object', async t => {
    let now = Date.now()
    const running = await start(t, { SWEEP_GRACE_SECONDS: '60' }, { now: () => now })
    const up = await upload(running.url, [['file', { data: 'soon gone' }], ['expiry_hours', '1'], ['max_downloads', '3']])
    now += HOUR - 1
    t.equal((await fetch(`${running.url}/download/${up.body.code}`, { method: 'HEAD' })).status, 200)
    now += 1
    t.equal((await fetch(`${running.url}/download/${up.body.code}`)).status, 404)
    t.equal((await fetch(`${running.url}/delete/${up.body.code}`, { method: 'DELETE' })).status, 404)
    t.same(await running.app.sweeper.sweepOnce(), { deleted: 0, failed: 0 }, 'kept during the grace period')
    now += 60_000
    t.same(await running.app.sweeper.sweepOnce(), { deleted: 1, failed: 0 })
    await assertClean(t, running)
  })

  t.test('a client that disconnects mid-upload leaves nothing behind', async t => {
    const running = await start(t)
    await new Promise<void>(resolve => {
      const req = http.request(`${running.url}/upload`, {
        method: 'POST',
        headers: { 'x-client-key': API_KEY, 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(64 * 1024 * 1024) }
      })
      req.on('error', () => resolve())
      req.write('--x\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\n')
      req.write(bytes(6 * 1024 * 1024), () => setTimeout(() => { req.destroy(); resolve() }, 200))
    })
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline && (await running.app.state.cleanup.countDue(Number.MAX_SAFE_INTEGER)) > 0) {
      await new Promise(resolve => setTimeout(resolve, 50))
    }
    await assertClean(t, running)
  })

  t.test('unknown routes answer 404 JSON', async t => {
    const { url } = await start(t)
    const res = await fetch(`${url}/nope`)
    t.equal(res.status, 404)
    t.match(await res.json(), { error: String, code: 'DROPCODE_ROUTE_NOT_FOUND' })
  })
}
