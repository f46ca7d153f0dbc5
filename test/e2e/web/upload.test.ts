/**
 * The web page in a real browser: uploads (one request and chunked), the code read from the
 * page, downloads through the info page with the bytes checked, HEAD-only info pages, 503s
 * retried, and no CSP violation on the way.
 */
import t, { type Test } from 'tap'
import { encode } from 'uqr'
import { ERROR_CATALOGUE } from '../../../src/core/errors.js'
import { API_KEY, startApp, testConfig } from '../../helpers/app.js'
import {
  codeOnPage, downloadThroughPage, launchBrowser, openTab, saveKey, TEST_CHUNK, testFile, unexpected, uploadThroughPage, watchUploads
} from './browser.js'

const browser = await launchBrowser(t)
const start = (t: Test, env: Record<string, string> = {}) =>
  startApp(t, testConfig(t, 'fs+local', {}, { MAX_CHUNK_SIZE: String(TEST_CHUNK), ...env }))

t.test('a small file goes up in one request; the code on the page downloads the same bytes', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'notes.txt', 300 * 1024)
  const code = await uploadThroughPage(page, file.path, { maxDownloads: 2, expiryHours: 5 })
  t.same(uploads.requests, ['/upload'], 'one request, no chunked session')
  t.equal(await page.locator('#result-sha256').textContent(), file.sha256, 'the service\'s SHA-256 is shown')
  t.equal(await page.locator('#result-name').textContent(), 'notes.txt')
  t.equal(await page.locator('#result-downloads').textContent(), '2')
  t.match(await page.locator('#result-expires').textContent(), /after 5 hours/)
  t.equal(await page.getByLabel('Link to share').inputValue(), `${url}/d/${code}`)
  t.equal(await page.getByLabel('Download link').inputValue(), `${url}/download/${code}`)
  await t.resolveMatch(page.evaluate('document.activeElement.id'), 'result-title', 'focus moves to the result')

  // The QR code of the link to share, drawn in the page: the same modules uqr encodes here.
  const qr = page.getByRole('img', { name: `QR code of ${url}/d/${code}` })
  await qr.waitFor()
  const expected = encode(`${url}/d/${code}`, { ecc: 'M', border: 2 })
  let d = ''
  expected.data.forEach((row, y) => row.forEach((dark, x) => { if (dark) d += `M${x},${y}h1v1h-1z` }))
  t.equal(await qr.locator('path').getAttribute('d'), d, 'the QR code holds the link to share')
  t.equal(await qr.getAttribute('viewBox'), `0 0 ${expected.size} ${expected.size}`)

  const got = await downloadThroughPage(page, url, code)
  t.ok(got.equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems), [], 'no console errors or CSP violations')
})

t.test('a multi-chunk file goes through the chunked API, several chunks in flight, each with its SHA-256', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  let inFlight = 0
  let maxInFlight = 0
  const digests: string[] = []
  await page.route('**/upload/chunk', async route => {
    const body = route.request().postDataBuffer()?.toString('latin1') ?? ''
    const m = /name="chunk_sha256"\r\n\r\n([0-9a-f]{64})\r\n/.exec(body)
    if (m !== null) digests.push(m[1]!)
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    await new Promise(resolve => setTimeout(resolve, 150)) // long enough for the others to start
    await route.continue()
    inFlight--
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'big.bin', 5 * TEST_CHUNK + 12345) // 6 chunks
  const code = await uploadThroughPage(page, file.path)
  t.equal(uploads.count('/upload/start'), 1)
  t.equal(uploads.count('/upload/chunk'), 6)
  t.same([...uploads.acked].sort(), [0, 1, 2, 3, 4, 5], 'every chunk acknowledged once')
  t.equal(uploads.count('/upload/complete'), 1)
  t.ok(uploads.count('/upload/verify') >= 1, 'verify checked the session before completing')
  t.ok(maxInFlight >= 2, `chunks in flight at once: ${maxInFlight}`)
  t.equal(digests.length, 6, 'every chunk declared its chunk_sha256')
  t.equal(await page.locator('#result-sha256').textContent(), file.sha256)
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.pending")'), null, 'the finished session is forgotten')
  const got = await downloadThroughPage(page, url, code)
  t.ok(got.equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems), [])
})

t.test('/d/{code} shows name, size, digest, downloads left and expiry with HEAD only; it counts no download', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'räksmörgås report.pdf', 4096)
  const code = await uploadThroughPage(page, file.path) // one download allowed
  const heads: string[] = []
  page.on('request', r => { if (r.url().includes('/download/')) heads.push(r.method()) })
  for (let i = 0; i < 3; i++) {
    const res = await page.goto(`${url}/d/${code}`)
    t.equal(res?.status(), 200)
    t.match(res?.headers()['content-security-policy'], /script-src 'self'/)
    await page.getByRole('heading', { name: 'A file is waiting for you' }).waitFor()
  }
  t.same(heads, ['HEAD', 'HEAD', 'HEAD'], 'the info page only ever sends HEAD')
  t.equal(await page.locator('#info-name').textContent(), 'räksmörgås report.pdf')
  t.equal(await page.locator('#info-size').textContent(), '4 KiB (4,096 bytes)')
  t.equal(await page.locator('#info-sha256').textContent(), file.sha256)
  t.equal(await page.locator('#info-left').textContent(), '1 (the next download is the last)', 'downloads left, though looked at three times')
  t.match(await page.locator('#info-expires').textContent(), /\(in 24 h\)$/, 'and when it expires')
  t.equal(await page.getByRole('link', { name: 'Download räksmörgås report.pdf' }).getAttribute('href'), `/download/${code}`)

  // The one permitted download is still there after three looks.
  const got = await downloadThroughPage(page, url, code)
  t.ok(got.equals(file.bytes))
  await page.goto(`${url}/d/${code}`)
  await page.getByRole('heading', { name: 'File not available' }).waitFor()
  t.match(await page.locator('#info-message').textContent(), /expired, reached its download limit, or been deleted/)
  t.same(unexpected(problems), [])
})

t.test('the code box leads to the info page, from a code or a pasted link', async t => {
  const { url } = await start(t)
  const { page } = await openTab(t, browser)
  await page.goto(url)
  await page.getByLabel('Download code').fill('nope')
  await page.getByRole('button', { name: 'Find file' }).click()
  t.equal(new URL(page.url()).pathname, '/', 'an invalid code stays on the page')
  t.match(await page.getByLabel('Download code').evaluate(el => (el as unknown as { validationMessage: string }).validationMessage), /6 letters or digits/)
  await page.getByLabel('Download code').fill(` ${url}/download/AbC123 `)
  await page.getByRole('button', { name: 'Find file' }).click()
  await page.waitForURL(`${url}/d/AbC123`)
  await page.getByRole('heading', { name: 'File not available' }).waitFor()
})

t.test('503 from the service is retried, for a single upload and for a chunk', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  const unavailable = JSON.stringify({ error: ERROR_CATALOGUE.DROPCODE_STORAGE_UNAVAILABLE.message, code: 'DROPCODE_STORAGE_UNAVAILABLE', request_id: 'x' })
  let refused = 0
  const refuseFirst = async (route: import('playwright-core').Route) => {
    if (refused++ === 0) {
      await route.fulfill({ status: 503, contentType: 'application/json', headers: { 'retry-after': '1' }, body: unavailable })
    } else {
      await route.continue()
    }
  }
  await page.route('**/upload', refuseFirst)
  await page.goto(url)
  await saveKey(page, API_KEY)
  const small = testFile(t, 'small.bin', 1000)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(small.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: 'The service is busy (503). Retrying in 1 s…' }).waitFor()
  const code = await codeOnPage(page)
  t.equal(uploads.count('/upload'), 2, 'sent again after the 503')
  t.ok((await downloadThroughPage(page, url, code)).equals(small.bytes))

  await page.unroute('**/upload')
  refused = 0
  await page.route('**/upload/chunk', refuseFirst)
  await page.goto(url)
  const big = testFile(t, 'big.bin', 3 * TEST_CHUNK)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(big.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /The service is busy \(503\)/ }).waitFor()
  const bigCode = await codeOnPage(page)
  t.same([...uploads.acked].sort(), [0, 1, 2], 'each chunk stored once')
  t.equal(uploads.count('/upload/start'), 1, 'the same session went on')
  t.equal(await page.getByRole('status').textContent(), 'Upload complete.', 'the busy notice cleared')
  t.ok((await downloadThroughPage(page, url, bigCode)).equals(big.bytes))
  t.same(unexpected(problems), [])
})
