/**
 * Uppy (@uppy/core + @uppy/tus), the upload widget teams already use, on a page of their own
 * origin, uploads to dropcode's tus endpoint unchanged: Chromium loads a page from a second
 * server (another port is another origin, allowed by CORS_ORIGINS) whose script (pages/uppy.ts,
 * bundled here with esbuild) uploads in several PATCHes with X-Client-Key, reads the code from
 * the completing PATCH's Dropcode-Code and from a HEAD afterwards, and shows it on the page.
 */
import { createHash } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import t, { type Test } from 'tap'
import { API_KEY, startApp, testConfig } from '../../helpers/app.js'
import { launchBrowser, openTab, TEST_CHUNK, testFile, unexpected } from './browser.js'

const PAGE = '<!doctype html><title>team tool</title>' +
  '<p>Code: <output id=code></output> (HEAD: <output id=head-code></output>)</p>' +
  '<p><output id=upload-url></output> <output id=error></output> <output id=state></output></p>' +
  '<script type=module src=/uppy-page.js></script>'

/** pages/uppy.ts and the Uppy it imports as one browser script, in memory. */
async function bundlePage (settings: { api: string, key: string, fileName: string, chunkSize: number }): Promise<Uint8Array> {
  const { outputFiles } = await build({
    entryPoints: [fileURLToPath(new URL('pages/uppy.ts', import.meta.url))],
    bundle: true,
    write: false,
    platform: 'browser',
    format: 'esm',
    target: 'chrome120',
    define: {
      __API__: JSON.stringify(settings.api),
      __KEY__: JSON.stringify(settings.key),
      __FILE_NAME__: JSON.stringify(settings.fileName),
      __CHUNK_SIZE__: String(settings.chunkSize)
    },
    logLevel: 'warning'
  })
  return outputFiles[0]!.contents
}

/** The team's tool on a second origin: the page, its script (once set), and the bytes it uploads. */
async function toolOrigin (t: Test, payload: Buffer) {
  const files = new Map<string, { type: string, body: string | Uint8Array }>([
    ['/', { type: 'text/html; charset=utf-8', body: PAGE }],
    ['/payload.bin', { type: 'application/octet-stream', body: payload }]
  ])
  const server = http.createServer((req, res) => {
    const file = files.get(req.url ?? '')
    res.writeHead(file === undefined ? 404 : 200, { 'content-type': file?.type ?? 'text/plain' })
    res.end(file?.body ?? 'not found')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    setScript: (script: Uint8Array) => files.set('/uppy-page.js', { type: 'text/javascript', body: script })
  }
}

t.test('Uppy on a page of another origin uploads over tus in several PATCHes and shows the code (cors_origins)', async t => {
  const file = testFile(t, 'payload.bin', 3 * TEST_CHUNK + 12_345) // 4 PATCHes of TEST_CHUNK
  const fileName = 'Übergabe from Uppy.bin' // Uppy sends it as `name` metadata, UTF-8 in base64
  const tool = await toolOrigin(t, file.bytes)
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { CORS_ORIGINS: tool.origin }))
  tool.setScript(await bundlePage({ api: url, key: API_KEY, fileName, chunkSize: TEST_CHUNK }))

  const browser = await launchBrowser(t)
  const { page, problems } = await openTab(t, browser)
  const requests: string[] = []
  page.on('request', r => { if (r.url().startsWith(`${url}/files/`)) requests.push(r.method()) })
  await page.goto(`${tool.origin}/`)
  await page.locator('#state', { hasText: /^(done|failed)$/ }).waitFor({ timeout: 60_000 })
  const text = async (id: string) => (await page.locator(`#${id}`).textContent()) ?? ''

  t.equal(await text('error'), '', 'Uppy reported no error')
  t.equal(await text('state'), 'done')
  const code = await text('code')
  t.match(code, /^[A-Za-z0-9]{6}$/, 'the code is shown, read from the completing PATCH\'s Dropcode-Code')
  t.equal(await text('head-code'), code, 'a HEAD of the upload afterwards says the same code')
  t.match(await text('upload-url'), new RegExp(`^${url}/files/[A-Za-z0-9_-]{22}$`), 'upload-success gives the upload\'s URL')
  t.same(requests.filter(m => m !== 'OPTIONS'), ['POST', 'PATCH', 'PATCH', 'PATCH', 'PATCH', 'HEAD'], 'created, then one PATCH per chunk')

  const res = await fetch(`${url}/download/${code}`)
  t.equal(res.status, 200)
  const bytes = Buffer.from(await res.arrayBuffer())
  t.equal(createHash('sha256').update(bytes).digest('hex'), file.sha256, 'the download is the bytes the page uploaded')
  t.equal(res.headers.get('content-disposition'), 'attachment; filename="Ubergabe from Uppy.bin"; filename*=UTF-8\'\'%C3%9Cbergabe%20from%20Uppy.bin', 'Uppy\'s `name` is the filename')
  t.equal(res.headers.get('dropcode-downloads-left'), '1', 'max_downloads from Uppy\'s meta')
  t.same(unexpected(problems), [], 'no console errors or warnings on the page')
})
