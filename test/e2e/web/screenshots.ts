/**
 * Screenshots of every state of the web page, at a desktop and a phone width (and some in dark
 * mode), into docs/screenshots/ for the documentation. Not a test (tap runs *.test.ts only):
 *
 *   npm run screenshots      (builds, then: node --import=tsx test/e2e/web/screenshots.ts)
 *
 * Runs the service in-process on 127.0.0.1 with a throw-away data directory and drives Debian's
 * Chromium like the browser tests do; sharp turns each picture into a small palette PNG.
 */
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core'
import sharp from 'sharp'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './browser.js'

const OUT = new URL('../../../docs/screenshots/', import.meta.url)
const KEY = 'screenshot-key'
const MiB = 1024 * 1024

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-shots-'))
const app = await buildApp(loadConfig({ API_KEYS: KEY, DATA_DIR: tmp, LOG_LEVEL: 'silent', MAX_CHUNK_SIZE: String(MiB), MAX_FILE_SIZE: String(64 * MiB) }))
await app.listen({ host: '127.0.0.1', port: 0 })
const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true })

const file = (name: string, size: number) => {
  const p = path.join(tmp, name)
  fs.writeFileSync(p, randomBytes(size))
  return p
}
const report = file('quarterly-report.pdf', 2 * MiB + 345_678)
const video = file('holiday-video.mp4', 12 * MiB)
const huge = file('disk-image.iso', 65 * MiB)

const sizes: Record<string, BrowserContextOptions> = {
  desktop: { viewport: { width: 960, height: 640 } },
  phone: { viewport: { width: 390, height: 760 }, isMobile: true, hasTouch: true }
}

fs.mkdirSync(OUT, { recursive: true })
const written: string[] = []
/** The header and the page's first card (not the "received a code?" box below it). */
async function area (page: Page) {
  const card = await page.locator('main > .card:not([hidden])').first().boundingBox()
  if (card === null) throw new Error('no card on the page')
  const margin = 12
  const x = Math.max(0, card.x - margin)
  const width = Math.min(card.width + 2 * margin, (page.viewportSize()?.width ?? 0) - x)
  return { x, y: 0, width, height: card.y + card.height + margin }
}

async function shot (page: Page, name: string, size: string) {
  await page.evaluate('document.fonts.ready')
  const target = new URL(`${name}-${size}.png`, OUT)
  const png = await page.screenshot({ fullPage: true, clip: await area(page), animations: 'disabled', caret: 'hide' })
  // A 64-colour palette (libimagequant, no dithering) keeps flat UI pictures sharp at about a
  // fifth of Chromium's truecolor size.
  await sharp(png).png({ palette: true, colours: 64, dither: 0, effort: 10, compressionLevel: 9 }).toFile(target.pathname)
  written.push(`${path.basename(target.pathname)} ${(fs.statSync(target).size / 1024).toFixed(0)} KiB`)
}

async function saveKey (page: Page, key: string) {
  await page.getByLabel('Your API key').fill(key)
  await page.getByRole('button', { name: 'Save key' }).click()
  await page.getByRole('button', { name: 'Forget key' }).waitFor()
}

const choose = (page: Page, p: string) => page.getByLabel('Drop a file here or choose a file').setInputFiles(p)
const done = (page: Page) => page.getByRole('heading', { name: 'Your file is ready to share' }).waitFor({ timeout: 60_000 })

try {
  for (const [size, options] of Object.entries(sizes)) {
    for (const scheme of ['light', 'dark'] as const) {
      const context = await browser.newContext({ ...options, colorScheme: scheme })
      const page = await context.newPage()
      const suffix = scheme === 'dark' ? `${size}-dark` : size
      await page.goto(url)
      await page.locator('#size-hint').filter({ hasText: 'Up to' }).waitFor()
      if (scheme === 'dark') {
        // Dark mode: the start page and a result are enough to show it.
        await saveKey(page, KEY)
        await choose(page, report)
        await shot(page, 'ready', suffix)
        await page.getByRole('button', { name: 'Upload' }).click()
        await done(page)
        await shot(page, 'done', suffix)
        await page.goto(`${url}/download/Zz9Zz9`)
        await shot(page, 'error-page', suffix)
        await context.close()
        continue
      }
      await shot(page, 'key', suffix)

      await saveKey(page, 'not-the-key')
      await choose(page, report)
      await page.getByRole('button', { name: 'Upload' }).click()
      await page.getByRole('alert').filter({ hasText: '401' }).waitFor()
      await shot(page, 'wrong-key', suffix)

      await saveKey(page, KEY)
      await choose(page, huge)
      await page.getByRole('alert').filter({ hasText: 'Nothing was sent' }).waitFor()
      await shot(page, 'too-large', suffix)

      await choose(page, report)
      await page.getByLabel('Downloads allowed').fill('3')
      await page.getByLabel('Expires after (hours)').fill('48')
      await shot(page, 'ready', suffix)

      // Uploading: the first chunks go through slowly, the rest wait until the picture is taken.
      let release!: () => void
      const held = new Promise<void>(resolve => { release = resolve })
      let n = 0
      await page.route('**/upload/chunk', async route => {
        if (++n > 4) await held
        else await new Promise(resolve => setTimeout(resolve, 400))
        await route.continue()
      })
      await choose(page, video)
      await page.getByRole('button', { name: 'Upload' }).click()
      await page.locator('#progress-text').filter({ hasText: /left$/ }).waitFor()
      await shot(page, 'uploading', suffix)

      // The network drops: the page waits, then resumes by itself.
      await context.setOffline(true)
      release()
      await page.getByRole('status').filter({ hasText: 'Connection lost' }).waitFor()
      await page.locator('#progress-text').filter({ hasText: /paused$/ }).waitFor()
      await shot(page, 'offline', suffix)

      // A reload while the network is down: the page offers to continue the session.
      await page.unroute('**/upload/chunk')
      await context.setOffline(false)
      await page.reload()
      await page.getByRole('region', { name: 'Unfinished upload' }).waitFor()
      await choose(page, video)
      await shot(page, 'resume', suffix)
      await page.getByRole('button', { name: 'Resume upload' }).click()
      await done(page)
      await shot(page, 'done', suffix)

      const code = (await page.locator('#result-code').textContent())!
      await page.goto(`${url}/d/${code}`)
      await page.getByRole('link', { name: /^Download / }).waitFor()
      await shot(page, 'info', suffix)
      await page.goto(`${url}/d/Zz9Zz9`)
      await page.getByRole('heading', { name: 'File not available' }).waitFor()
      await shot(page, 'unavailable', suffix)
      await page.goto(`${url}/download/Zz9Zz9`)
      await shot(page, 'error-page', suffix)
      await context.close()
    }
  }
  process.stdout.write(`${written.join('\n')}\n`)
} finally {
  await browser.close()
  await app.close()
  fs.rmSync(tmp, { recursive: true, force: true })
}
