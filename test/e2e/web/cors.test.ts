/**
 * CORS_ORIGINS: a team's own web tool, served from another origin, uses the API from a browser.
 * Driven the way it is used: Chromium loads a page from a second server (another port is
 * another origin) whose script uploads with X-Client-Key (which makes the browser send a
 * preflight without the key), reads the answer and the download's headers, and deletes.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { API_KEY, startApp, testConfig } from '../../helpers/app.js'
import { launchBrowser, openTab } from './browser.js'

/** A second origin: one blank page whose script the test drives through page.evaluate. */
async function toolOrigin (t: Test): Promise<string> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    res.end('<!doctype html><title>team tool</title><p>tool</p>')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise(resolve => server.close(resolve)))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

interface RoundTrip { upload?: { status: number, body: { code?: string, sha256?: string } }, download?: { status: number, text: string, disposition: string | null, digest: string | null }, deleted?: number, error?: string }

/** What the tool page does: upload with the key, download, delete. Runs in the browser. */
async function roundTrip (page: import('playwright-core').Page, api: string, key: string): Promise<RoundTrip> {
  return await page.evaluate(async ({ api, key }) => {
    const out: RoundTrip = {}
    try {
      const fd = new FormData()
      fd.append('max_downloads', '2') // one download, then the delete finds it
      fd.append('file', new Blob(['hello from another origin']), 'note.txt')
      const up = await fetch(`${api}/upload`, { method: 'POST', headers: { 'X-Client-Key': key }, body: fd })
      const body = await up.json() as { code?: string, sha256?: string }
      out.upload = { status: up.status, body }
      const code = body.code!
      const down = await fetch(`${api}/download/${code}`)
      out.download = { status: down.status, text: await down.text(), disposition: down.headers.get('content-disposition'), digest: down.headers.get('repr-digest') }
      const del = await fetch(`${api}/delete/${code}`, { method: 'DELETE' })
      out.deleted = del.status
    } catch (err) {
      out.error = String(err)
    }
    return out
  }, { api, key })
}

t.test('a page on a listed origin uploads, downloads and deletes from Chromium (cors_origins)', async t => {
  const tool = await toolOrigin(t)
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { CORS_ORIGINS: `https://elsewhere.example, ${tool}` }))
  const browser = await launchBrowser(t)
  const { page } = await openTab(t, browser)
  await page.goto(`${tool}/`)
  const result = await roundTrip(page, url, API_KEY)
  t.equal(result.error, undefined, 'no request was blocked')
  t.equal(result.upload?.status, 200)
  t.match(result.upload?.body, { code: /^[A-Za-z0-9]{6}$/, sha256: /^[0-9a-f]{64}$/ })
  t.equal(result.download?.status, 200)
  t.equal(result.download?.text, 'hello from another origin')
  t.match(result.download?.disposition, /attachment; filename="note.txt"/, 'Content-Disposition is exposed to the script')
  t.match(result.download?.digest, /^sha-256=:[A-Za-z0-9+/]+=*:$/, 'Repr-Digest is exposed to the script')
  t.equal(result.deleted, 200)
})

t.test('an origin not listed, or CORS off (the default), is refused by the browser', async t => {
  const tool = await toolOrigin(t)
  const listed = await startApp(t, testConfig(t, 'fs+local', {}, { CORS_ORIGINS: 'https://elsewhere.example' }))
  const off = await startApp(t, testConfig(t, 'fs+local', {}, {}))
  const browser = await launchBrowser(t)
  const { page } = await openTab(t, browser)
  await page.goto(`${tool}/`)
  for (const api of [listed.url, off.url]) {
    const result = await roundTrip(page, api, API_KEY)
    t.match(result.error, /TypeError: Failed to fetch/, `${api === off.url ? 'off' : 'other origin'}: the browser blocks the upload`)
    t.equal(result.upload, undefined)
  }
})

t.test('a preflight is answered without a key; our own pages, metrics and health stay same-origin', async t => {
  const origin = 'http://tool.example:8080'
  const { url, metricsUrl } = await startApp(t, testConfig(t, 'fs+local', {}, { CORS_ORIGINS: origin, RATE_LIMIT_UPLOADS: '1' }))
  for (let i = 0; i < 3; i++) { // more preflights than the per-key upload limit allows uploads
    const res = await fetch(`${url}/upload/chunk`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-client-key' }
    })
    t.equal(res.status, 204, 'no key, no rate limit: 204')
    t.equal(res.headers.get('access-control-allow-origin'), origin)
    t.match(res.headers.get('access-control-allow-headers'), /X-Client-Key/)
    t.match(res.headers.get('access-control-allow-methods'), /POST/)
  }
  const del = await fetch(`${url}/delete/AAAAAA`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'DELETE' } })
  t.equal(del.status, 204)
  t.match(del.headers.get('access-control-allow-methods'), /DELETE/)
  for (const address of [`${url}/`, `${url}/healthz`, metricsUrl]) {
    const res = await fetch(address, { headers: { origin } })
    t.equal(res.headers.get('access-control-allow-origin'), null, `${address}: no CORS header`)
    await res.arrayBuffer()
  }
  const pre = await fetch(`${url}/healthz`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } })
  t.equal(pre.status, 404, 'no preflight outside the API')
  await pre.arrayBuffer()
})
