/**
 * Helpers for the web page's browser tests: Debian's Chromium driven by playwright-core
 * (never playwright's own browser download), one browser per test file, one context (own
 * localStorage) per test, everything closed in teardown.
 */
import { createHash, randomBytes } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page, type Response } from 'playwright-core'
import type { Test } from 'tap'
import { dataDir } from '../../helpers/tmp.js'

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run']

/** Chunk size the browser tests give the service (MAX_CHUNK_SIZE), so a few MiB make several chunks. */
export const TEST_CHUNK = 1024 * 1024

export async function launchBrowser (t: Test): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM_PATH)) throw new Error(`no Chromium at ${CHROMIUM_PATH}: apt-get install chromium (.ci/run does), or set CHROMIUM_PATH`)
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true })
  t.teardown(() => browser.close())
  return browser
}

export interface Tab {
  context: BrowserContext
  page: Page
  /** Console errors and warnings (CSP and Trusted Types violations among them) and uncaught page errors. */
  problems: string[]
}

/** A fresh context and page, closed at the end of the test. */
export async function openTab (t: Test, browser: Browser, options: BrowserContextOptions = {}): Promise<Tab> {
  const context = await browser.newContext(options)
  t.teardown(() => context.close())
  const page = await context.newPage()
  page.setDefaultTimeout(20_000)
  const problems: string[] = []
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`) })
  page.on('pageerror', e => problems.push(`pageerror: ${e.message}`))
  return { context, page, problems }
}

/** Problems other than the browser's own log line for an HTTP error status the test caused. */
export const unexpected = (problems: string[]) => problems.filter(p => !/Failed to load resource: the server responded with a status of/.test(p))

/** A file of `size` random bytes in a fresh directory (removed at the end of the test). */
export function testFile (t: Test, name: string, size: number): { path: string, bytes: Buffer, sha256: string } {
  const bytes = randomBytes(size)
  const file = path.join(dataDir(t), name)
  fs.writeFileSync(file, bytes)
  return { path: file, bytes, sha256: createHash('sha256').update(bytes).digest('hex') }
}

export async function saveKey (page: Page, key: string): Promise<void> {
  await page.getByLabel('Your API key').fill(key)
  await page.getByRole('button', { name: 'Save key' }).click()
  await page.getByRole('button', { name: 'Forget key' }).waitFor()
}

/** Chooses the file, presses Upload (or Resume upload) and waits for the code on the page. */
export async function uploadThroughPage (page: Page, file: string, settings: { maxDownloads?: number, expiryHours?: number } = {}): Promise<string> {
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file)
  if (settings.maxDownloads !== undefined) await page.getByLabel('Downloads allowed').fill(String(settings.maxDownloads))
  if (settings.expiryHours !== undefined) await page.getByLabel('Expires after (hours)').fill(String(settings.expiryHours))
  await page.getByRole('button', { name: /^(Upload|Resume upload)$/ }).click()
  return await codeOnPage(page)
}

/** Waits for the result and reads the code from the page. */
export async function codeOnPage (page: Page, timeout = 30_000): Promise<string> {
  await page.getByRole('heading', { name: 'Your file is ready to share' }).waitFor({ timeout })
  const code = (await page.locator('#result-code').textContent())?.trim() ?? ''
  if (!/^[A-Za-z0-9]{6}$/.test(code)) throw new Error(`no code on the page: ${JSON.stringify(code)}`)
  return code
}

/** Opens /d/{code}, presses its download button, and returns the downloaded bytes. */
export async function downloadThroughPage (page: Page, baseUrl: string, code: string): Promise<Buffer> {
  await page.goto(`${baseUrl}/d/${code}`)
  const button = page.getByRole('link', { name: /^Download / })
  const [download] = await Promise.all([page.waitForEvent('download'), button.click()])
  const file = await download.path()
  return fs.readFileSync(file)
}

/** Records the chunk indexes the service acknowledged (200) and the upload requests the page sent. */
export function watchUploads (page: Page) {
  const acked: number[] = []
  const requests: string[] = []
  page.on('request', r => {
    const path = new URL(r.url()).pathname
    if (path.startsWith('/upload')) requests.push(path)
  })
  page.on('response', (r: Response) => {
    if (!r.url().endsWith('/upload/chunk') || r.status() !== 200) return
    r.json().then((b: { chunk_index: number }) => acked.push(b.chunk_index), () => {})
  })
  return {
    acked,
    requests,
    count: (path: string) => requests.filter(p => p === path).length
  }
}
