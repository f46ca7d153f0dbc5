/**
 * The web page itself: how it is served (CSP, headers, /limits, OpenAPI), the download error
 * page, the key prompt and the failures people meet (401, 413 before sending, 507), keyboard
 * use and accessible names, a phone's width, dark mode, and an axe-core scan of each state.
 */
import fs from 'node:fs'
import http from 'node:http'
import type { Socket } from 'node:net'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'
import t from 'tap'
import { ERROR_CATALOGUE } from '../../../src/core/errors.js'
import { ERROR_PAGE_CSP, PAGE_CSP } from '../../../src/http/page-security.js'
import { WEB_ROOT } from '../../../src/routes/web.js'
import { API_KEY, eventually, startApp, testConfig, upload } from '../../helpers/app.js'
import {
  codeOnPage, launchBrowser, openTab, saveKey, TEST_CHUNK, testFile, unexpected, uploadThroughPage, watchUploads
} from './browser.js'

const browser = await launchBrowser(t)
const start = (t: Parameters<typeof startApp>[0], env: Record<string, string> = {}, overrides: Parameters<typeof startApp>[2] = {}) =>
  startApp(t, testConfig(t, 'fs+local', {}, { MAX_CHUNK_SIZE: String(TEST_CHUNK), ...env }), overrides)

const axeSource = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** WCAG 2.1 A/AA and best-practice violations on the page as it is (run in a context that bypasses CSP, to inject axe). */
async function axeViolations (page: Page): Promise<string[]> {
  await page.addScriptTag({ content: axeSource })
  const result = await page.evaluate('axe.run(document, { runOnly: { type: \'tag\', values: [\'wcag2a\', \'wcag2aa\', \'wcag21a\', \'wcag21aa\', \'best-practice\'] } })') as {
    violations: Array<{ id: string, help: string, nodes: Array<{ target: string[] }> }>
  }
  return result.violations.map(v => `${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`)
}

const get = (url: string, headers: http.OutgoingHttpHeaders = {}) => new Promise<http.IncomingMessage>((resolve, reject) => {
  http.get(url, { headers }, r => resolve(r.resume())).on('error', reject)
})

/** Relative luminance (WCAG) of a computed CSS rgb() colour. */
function luminance (css: string): number {
  const [r, g, b] = (css.match(/[\d.]+/g) ?? []).slice(0, 3).map(Number).map(c => {
    const s = c / 255
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4
  })
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!
}

t.test('the page is served with a strict CSP, no inline script or style, and /limits tells the limits', async t => {
  const { url, config } = await start(t, { MAX_FILE_SIZE: '123456789', MAX_DOWNLOADS: '50', MAX_EXPIRY_HOURS: '48' })
  for (const path of ['/', '/d/AbC123']) {
    const res = await fetch(`${url}${path}`)
    t.equal(res.status, 200, path)
    t.match(res.headers.get('content-type'), /^text\/html/)
    t.equal(res.headers.get('content-security-policy'), PAGE_CSP, `${path}: CSP`)
    t.equal(res.headers.get('referrer-policy'), 'no-referrer')
    t.equal(res.headers.get('x-content-type-options'), 'nosniff')
    t.equal(res.headers.get('x-frame-options'), 'DENY')
    const html = await res.text()
    t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'every script has a src: no inline code')
    t.notMatch(html, /\son[a-z]+=/i, 'no inline event handlers')
    t.notMatch(html, /\sstyle=|<style/i, 'no inline styles')
    t.notMatch(html, /https?:\/\//, 'nothing from another origin')
  }
  t.notMatch(PAGE_CSP, /unsafe-inline|unsafe-eval|\*/)
  t.match(PAGE_CSP, /script-src 'self'/)
  t.match(PAGE_CSP, /default-src 'none'/)

  for (const [asset, type] of [['main.js', /javascript/], ['upload.js', /javascript/], ['style.css', /^text\/css/], ['icon.svg', /^image\/svg\+xml/]] as const) {
    const res = await fetch(`${url}/assets/${asset}`)
    t.equal(res.status, 200, asset)
    t.match(res.headers.get('content-type'), type)
    t.equal(res.headers.get('content-security-policy'), PAGE_CSP)
    t.equal(res.headers.get('cache-control'), 'no-cache')
    // node:http, not fetch: fetch adds Cache-Control: no-cache to conditional requests (and
    // asks for compression, whose representation has its own ETag).
    const plain = await get(`${url}/assets/${asset}`)
    const again = await get(`${url}/assets/${asset}`, { 'if-none-match': String(plain.headers.etag) })
    t.equal(again.statusCode, 304, `${asset}: revalidated`)
  }
  const compressed = await get(`${url}/assets/upload.js`, { 'accept-encoding': 'gzip, br' })
  t.equal(compressed.headers['content-encoding'], 'br', 'served brotli-compressed (built at npm run build)')
  t.match(compressed.headers.vary, /accept-encoding/i)
  t.equal(compressed.headers['content-security-policy'], PAGE_CSP)
  t.equal((await fetch(`${url}/assets/nope.js`)).status, 404)
  t.equal((await fetch(`${url}/assets/../package.json`)).status, 404, 'nothing outside the assets')

  const limits = await fetch(`${url}/limits`)
  t.equal(limits.status, 200)
  t.same(await limits.json(), {
    max_file_size: 123456789,
    max_chunk_size: TEST_CHUNK,
    max_total_chunks: config.limits.maxTotalChunks,
    max_downloads: 50,
    max_expiry_hours: 48,
    default_max_downloads: 1,
    default_expiry_hours: 24,
    chunks_in_flight: 1,
    chunk_size: Math.min(TEST_CHUNK, 64 * 1024 * 1024) // the filesystem's 64 MiB, within max_chunk_size
  })

  const doc = await (await fetch(`${url}/openapi.json`)).json() as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { properties?: object } }> }> }>> }
  t.ok(doc.paths['/limits']?.get?.responses['200']?.content?.['application/json']?.schema.properties, '/limits is documented with its schema')
  t.ok(doc.paths['/']?.get?.responses['200']?.content?.['text/html'], '/ is documented')
  t.ok(doc.paths['/d/{code}']?.get, '/d/{code} is documented')
  t.ok(fs.existsSync(`${WEB_ROOT}index.html`), 'the page is built into dist/web')
})

t.test('the download error page: same look as the page, plain words, the same page whatever the reason, a link back', async t => {
  let now = Date.now()
  const { url } = await start(t, {}, { now: () => now })
  const used = await upload(url, [['file', { data: 'once' }]])
  await (await fetch(`${url}/download/${used.body.code}`)).text()
  const expiring = await upload(url, [['file', { data: 'soon' }], ['expiry_hours', '1']])
  now += 2 * 3600_000

  const pages = []
  for (const code of ['Zz9Zz9', used.body.code, expiring.body.code, 'abc', 'a%20b%2Fc']) {
    const res = await fetch(`${url}/download/${code as string}`)
    t.equal(res.status, 404, String(code))
    t.match(res.headers.get('content-type'), /^text\/html/)
    t.equal(res.headers.get('content-security-policy'), ERROR_PAGE_CSP)
    pages.push(await res.text())
  }
  t.equal(new Set(pages).size, 1, 'unknown, used up, expired and malformed codes get the very same page')
  t.notMatch(ERROR_PAGE_CSP, /script-src|unsafe/)

  const { page, problems } = await openTab(t, browser)
  await page.goto(url)
  const pageLook = await page.evaluate('(() => { const b = getComputedStyle(document.body); const c = getComputedStyle(document.querySelector(\'.card\')); return [b.backgroundColor, b.fontFamily, c.backgroundColor, c.borderRadius] })()')
  const res = await page.goto(`${url}/download/${used.body.code}`)
  t.equal(res?.status(), 404)
  await page.getByRole('heading', { level: 1, name: 'File not available' }).waitFor()
  t.match(await page.locator('main').textContent(), /No file with this code: it may have expired, reached its download limit, or been deleted\./)
  const errorLook = await page.evaluate('(() => { const b = getComputedStyle(document.body); const c = getComputedStyle(document.querySelector(\'.card\')); return [b.backgroundColor, b.fontFamily, c.backgroundColor, c.borderRadius] })()')
  t.same(errorLook, pageLook, 'the page\'s stylesheet applies')
  t.equal(await page.getByRole('link', { name: 'dropcode', exact: true }).getAttribute('href'), '/')
  await page.getByRole('link', { name: 'Go to the dropcode page' }).click()
  await page.getByRole('heading', { level: 1, name: 'Send a file' }).waitFor()
  t.equal(new URL(page.url()).pathname, '/')
  t.same(unexpected(problems), [], 'no CSP violation on the error page')
})

t.test('the key prompt: kept in localStorage, needed before uploading, refused keys (401) said plainly, forgettable', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  await page.goto(url)
  const keyInput = page.getByLabel('Your API key')
  t.equal(await keyInput.getAttribute('type'), 'password')
  t.equal(await keyInput.getAttribute('autocomplete'), 'off')
  t.ok(await page.getByRole('button', { name: 'Forget key' }).isHidden())

  // Large enough that the 401 is answered before the body is read.
  const file = testFile(t, 'a.txt', 900 * 1024)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('alert').filter({ hasText: 'Enter your API key first: uploads need one.' }).waitFor()
  await t.resolveMatch(page.evaluate('document.activeElement.id'), 'key-input', 'focus goes to the key')
  t.same(uploads.requests, [], 'nothing sent without a key')

  // A key that was good when saved (Save key checks it) and revoked since: the upload's 401.
  const made = await (await fetch(`${url}/admin/keys`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'browser' }) })).json() as { secret: string }
  await saveKey(page, made.secret)
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.apiKey")'), made.secret)
  t.equal((await fetch(`${url}/admin/keys/browser`, { method: 'DELETE', headers: { 'x-client-key': API_KEY } })).status, 200)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('alert').filter({ hasText: 'The service refused this API key (401). Enter a valid key and try again.' }).waitFor()
  t.same(uploads.requests, ['/upload'])
  await keyInput.waitFor()
  await t.resolveMatch(page.evaluate('document.activeElement.id'), 'key-input', 'the key prompt is back, focused')
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.apiKey")'), null, 'the refused key is forgotten')

  await saveKey(page, API_KEY)
  await page.reload()
  await page.getByRole('button', { name: 'Forget key' }).waitFor()
  t.ok(await keyInput.isHidden(), 'after a reload the key is still there')
  const code = await uploadThroughPage(page, file.path)
  t.match(code, /^[A-Za-z0-9]{6}$/)

  await page.getByRole('button', { name: 'Forget key' }).click()
  await keyInput.waitFor()
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.apiKey")'), null, 'Forget key clears localStorage')
  await page.getByRole('status').filter({ hasText: 'API key forgotten' }).waitFor()
  t.same(unexpected(problems), [])
})

t.test('too large: known before sending (413 without a request), and the service\'s own 413 and 507 said plainly', async t => {
  const { url } = await start(t, { MAX_FILE_SIZE: String(1024 * 1024) })
  const { page } = await openTab(t, browser)
  const uploads = watchUploads(page)
  await page.goto(url)
  await saveKey(page, API_KEY)
  await page.locator('#size-hint').filter({ hasText: 'Up to 1 MiB' }).waitFor()
  const big = testFile(t, 'big.iso', 2 * 1024 * 1024)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(big.path)
  const tooLarge = 'This file is 2 MiB; this service accepts files up to 1 MiB. Nothing was sent.'
  await page.getByRole('alert').filter({ hasText: tooLarge }).waitFor()
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('alert').filter({ hasText: tooLarge }).waitFor()
  t.same(uploads.requests, [], 'not a byte was sent')

  const small = testFile(t, 'small.bin', 1000)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(small.path)
  t.equal(await page.getByRole('alert').textContent(), '', 'a file that fits clears the message')
  for (const [status, code, shown] of [
    [413, 'DROPCODE_FILE_TOO_LARGE', 'The file is too large (413). The file is larger than this service accepts.'],
    [403, 'DROPCODE_QUOTA_EXCEEDED', `This API key has no room left in its storage quota (403). ${ERROR_CATALOGUE.DROPCODE_QUOTA_EXCEEDED.message}`],
    [403, 'DROPCODE_TOO_MANY_SESSIONS', `This API key has as many unfinished uploads open as it may (403). ${ERROR_CATALOGUE.DROPCODE_TOO_MANY_SESSIONS.message}`],
    [507, 'DROPCODE_STORAGE_FULL', 'The service is out of storage space (507). Nothing was lost on your side: try again later.']
  ] as const) {
    await page.route('**/upload', route => route.fulfill({ status, contentType: 'application/json', body: JSON.stringify({ error: ERROR_CATALOGUE[code].message, code }) }))
    await page.getByRole('button', { name: 'Upload' }).click()
    await page.getByRole('alert').filter({ hasText: shown }).waitFor()
    await page.unroute('**/upload')
  }
})

t.test('keyboard only: save the key, pick a file, upload, copy the code; every control has a name', async t => {
  const { url } = await start(t)
  const { context, page, problems } = await openTab(t, browser)
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url })
  // Intercept file choosers from the start: turning interception on is asynchronous, and a
  // waitForEvent started just before the key press lost that race on a loaded machine.
  const choosers: Array<import('playwright-core').FileChooser> = []
  page.on('filechooser', c => choosers.push(c))
  await page.goto(url)
  for (const [role, name] of [
    ['banner', undefined], ['main', undefined], ['heading', 'Send a file'], ['button', 'Save key'], ['spinbutton', 'Downloads allowed'],
    ['spinbutton', 'Expires after (hours)'], ['button', 'Upload'], ['textbox', 'Download code'], ['button', 'Find file'],
    ['region', 'API key'], ['region', 'Received a code?']
  ] as const) {
    t.equal(await page.getByRole(role, name !== undefined ? { name, exact: true } : {}).count(), 1, `${role} ${name ?? ''}`)
  }
  t.equal(await page.getByLabel('Your API key').count(), 1)
  t.equal(await page.getByLabel('Drop a file here or choose a file').count(), 1)
  t.equal(await page.getByRole('status').count(), 1, 'one live region for news')
  t.equal(await page.getByRole('alert').count(), 1, 'one alert region for failures')

  const focused = () => page.evaluate('document.activeElement.id || document.activeElement.textContent')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'dropcode', 'first the home link')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'key-input')
  await page.keyboard.type(API_KEY)
  await page.keyboard.press('Enter')
  await page.getByRole('button', { name: 'Forget key' }).waitFor()
  t.equal(await focused(), 'file-input', 'after saving the key, focus goes to the file')

  const file = testFile(t, 'keyboard.txt', 2048)
  await page.keyboard.press('Space')
  await eventually(async () => { if (choosers.length === 0) throw new Error('no file chooser opened') })
  await choosers[0]!.setFiles(file.path)
  await page.locator('#file-info').filter({ hasText: 'keyboard.txt · 2 KiB' }).waitFor()
  t.equal(await page.evaluate('getComputedStyle(document.getElementById("drop")).outlineStyle'), 'solid', 'the drop zone shows focus')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'max-downloads')
  await page.keyboard.press('ArrowUp')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'expiry-hours')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'upload-button')
  await page.keyboard.press('Enter')
  const code = await codeOnPage(page)
  t.equal(await focused(), 'result-title', 'focus moves to the result')
  t.equal(await page.locator('#result-downloads').textContent(), '2', 'ArrowUp raised the downloads to 2')
  await page.keyboard.press('Tab')
  t.equal(await focused(), 'copy-code')
  await page.keyboard.press('Enter')
  await page.getByRole('status').filter({ hasText: 'Code copied to the clipboard.' }).waitFor()
  await t.resolveMatch(page.evaluate('navigator.clipboard.readText()'), code)
  await page.getByRole('button', { name: 'Copy link', exact: true }).press('Enter')
  await page.getByRole('status').filter({ hasText: 'Link copied to the clipboard.' }).waitFor()
  await t.resolveMatch(page.evaluate('navigator.clipboard.readText()'), `${url}/d/${code}`)
  t.same(unexpected(problems), [])
})

t.test('a phone\'s width: nothing overflows sideways, and an upload works', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser, { viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true })
  const overflow = () => page.evaluate('[...document.querySelectorAll(\'body *\')].filter(el => el.getClientRects().length > 0 && el.getBoundingClientRect().right > innerWidth + 0.5).map(el => el.id || el.tagName)')
  await page.goto(url)
  t.same(await overflow(), [], 'home')
  await saveKey(page, API_KEY)
  const file = testFile(t, 'a-rather-long-file-name-that-must-wrap-on-a-phone-screen.tar.gz', 5000)
  const code = await uploadThroughPage(page, file.path)
  t.same(await overflow(), [], 'result')
  t.equal(await page.evaluate('document.documentElement.scrollWidth <= innerWidth'), true)
  await page.goto(`${url}/d/${code}`)
  await page.getByRole('link', { name: /^Download / }).waitFor()
  t.same(await overflow(), [], 'info page')
  const box = await page.getByRole('link', { name: /^Download / }).boundingBox()
  t.ok(box !== null && box.height >= 40, `the download button is large enough to tap (${box?.height ?? 0} px)`)
  t.same(unexpected(problems), [])
})

t.test('dark mode: dark background, light text, contrast kept (axe) on the page and the error page', async t => {
  const { url } = await start(t)
  const { page } = await openTab(t, browser, { colorScheme: 'dark', bypassCSP: true })
  for (const path of ['/', '/download/Zz9Zz9']) {
    await page.goto(`${url}${path}`)
    const [bg, fg] = await page.evaluate('[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]') as [string, string]
    t.ok(luminance(bg) < 0.05, `${path}: dark background ${bg}`)
    t.ok(luminance(fg) > 0.6, `${path}: light text ${fg}`)
    t.same(await axeViolations(page), [], `${path}: no axe violations in dark mode`)
  }
})

t.test('axe finds no WCAG 2.1 A/AA violation in any state of the page', async t => {
  const { url } = await start(t)
  const { page } = await openTab(t, browser, { bypassCSP: true })
  const scan = async (state: string) => t.same(await axeViolations(page), [], state)
  await page.goto(url)
  await scan('home, no key')
  await saveKey(page, API_KEY)
  const file = testFile(t, 'report.pdf', 3000)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await scan('file chosen')
  await page.getByRole('button', { name: 'Upload' }).click()
  const code = await codeOnPage(page)
  await scan('result')
  await page.goto(`${url}/d/${code}`)
  await page.getByRole('link', { name: 'Download report.pdf' }).waitFor()
  await scan('info page')
  await page.goto(`${url}/d/Zz9Zz9`)
  await page.getByRole('heading', { name: 'File not available' }).waitFor()
  await scan('info page, unknown code')
  await page.goto(`${url}/download/Zz9Zz9`)
  await scan('download error page')
})

t.test('regression: a browser\'s keep-alive connection gets no socket listener per request (stall guard; MaxListenersExceededWarning)', async t => {
  const { app, url } = await start(t)
  const sockets: Socket[] = []
  app.server.on('connection', (s: Socket) => sockets.push(s))
  const warnings: string[] = []
  const onWarning = (w: Error) => warnings.push(w.name)
  process.on('warning', onWarning)
  t.teardown(() => { process.off('warning', onWarning) })
  // What a connection that carried one request holds.
  const agent = new http.Agent({ keepAlive: true })
  await new Promise(resolve => http.get(`${url}/healthz`, { agent }, res => res.resume().on('end', resolve)))
  const closeListeners = (s: Socket) => s.listenerCount('close')
  const baseline = closeListeners(sockets[0]!)
  agent.destroy()

  const { page } = await openTab(t, browser)
  const served = new Map<Socket, number>()
  app.server.on('request', (req: http.IncomingMessage) => served.set(req.socket, (served.get(req.socket) ?? 0) + 1))
  for (let i = 0; i < 15; i++) await page.goto(url)
  await page.goto('about:blank')
  const busiest = Math.max(...served.values())
  t.ok(busiest >= 12, `one connection carried ${busiest} requests`)
  // Once the last responses have finished (a response in flight holds a listener of its own).
  const overgrown = () => [...served].filter(([s]) => closeListeners(s) > baseline)
  await eventually(async () => { if (overgrown().length > 0) throw new Error('listeners left') }).catch(() => {})
  t.same(overgrown().map(([s, n]) => `${n} requests: ${closeListeners(s)} close listeners`), [], `no connection holds more close listeners than after one request (${baseline})`)
  t.notOk(warnings.includes('MaxListenersExceededWarning'))
})

t.test('Save key checks the key with the service (GET /key): a wrong one is refused at once and not saved', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  await page.goto(url)
  await page.getByLabel('Your API key').fill('not-a-key')
  await page.getByRole('button', { name: 'Save key' }).click()
  await page.getByRole('alert').filter({ hasText: 'The service does not accept this key (401).' }).waitFor()
  t.equal(await page.getByRole('button', { name: 'Forget key' }).isVisible(), false, 'not saved')
  t.equal(await page.evaluate('localStorage.length'), 0, 'nothing stored in the browser')

  await page.getByLabel('Your API key').fill(API_KEY)
  await page.getByRole('button', { name: 'Save key' }).click()
  await page.getByRole('button', { name: 'Forget key' }).waitFor()
  t.match(await page.locator('#notice').textContent(), /^API key saved in this browser: the service knows it as env-[0-9a-f]{12}\.$/)
  t.equal(await page.getByRole('alert').textContent(), '', 'the refusal is cleared')
  t.same(unexpected(problems).filter(p => !p.includes('401')), [], 'no problem but the refused check itself')
})

t.test('the page shows the one line that installs the CLI this service serves, with the file\'s SHA-256', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  await page.goto(url)
  const box = page.getByRole('region', { name: 'From a terminal or a CI job' })
  await box.waitFor()
  t.equal(await page.locator('#cli-command').textContent(), `curl -fsSL ${url}/cli/dropcode.mjs -o dropcode && node dropcode --help`)
  const { createHash } = await import('node:crypto')
  const { CLI_BUNDLE } = await import('../../../src/routes/cli.js')
  t.equal(await page.locator('#cli-sha256').textContent(), createHash('sha256').update(fs.readFileSync(CLI_BUNDLE)).digest('hex'), 'the served file\'s SHA-256')
  t.same(unexpected(problems), [])
})
