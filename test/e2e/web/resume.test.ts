/**
 * Resuming chunked uploads in a real browser: after the network drops mid-upload (the browser
 * goes offline), after requests fail while the browser thinks it is online, and after a page
 * reload (the session id kept in localStorage, the file picked again). Each time the page asks
 * /upload/verify what is missing and sends only that; the downloaded bytes are checked.
 */
import t, { type Test } from 'tap'
import { envKeyName } from '../../../src/services/keys.js'
import { API_KEY, eventually, startApp, testConfig } from '../../helpers/app.js'
import {
  codeOnPage, downloadThroughPage, launchBrowser, openTab, saveKey, TEST_CHUNK, testFile, unexpected, watchUploads
} from './browser.js'

const browser = await launchBrowser(t)
const start = (t: Test) => startApp(t, testConfig(t, 'fs+local', {}, { MAX_CHUNK_SIZE: String(TEST_CHUNK) }))
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))
const counted = (acked: number[]) => acked.reduce<Record<number, number>>((n, i) => ({ ...n, [i]: (n[i] ?? 0) + 1 }), {})

t.test('the network drops mid-upload: the page waits for it, asks verify, and sends only what is missing', async t => {
  const { url } = await start(t)
  const { context, page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  let chunkRequests = 0
  let cut!: () => void
  const cutting = new Promise<void>(resolve => { cut = resolve })
  await page.route('**/upload/chunk', async route => {
    chunkRequests++
    if (chunkRequests === 5) {
      await cutting // once the test has seen a rate and an ETA
      await context.setOffline(true)
      await route.abort('internetdisconnected')
      return
    }
    await sleep(300) // slow enough to show a rate and an ETA
    await route.continue()
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'video.mp4', 8 * TEST_CHUNK - 1000) // 8 chunks
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByRole('button', { name: 'Upload' }).click()

  const progress = page.getByRole('progressbar', { name: 'Uploading video.mp4' })
  await progress.waitFor()
  await page.locator('#progress-text').filter({ hasText: /MiB of 8 MiB \(\d+ %\) · [\d.]+ [KM]iB\/s · about \d+ s left/ }).waitFor()
  cut()

  await page.getByRole('status').filter({ hasText: 'Connection lost. The upload continues by itself when the network is back.' }).waitFor()
  await page.locator('#progress-text').filter({ hasText: /MiB of 8 MiB \(\d+ %\) · paused$/ }).waitFor()
  const value = Number(await progress.getAttribute('value'))
  t.ok(value > 0 && value < file.bytes.length, `progress stopped part way: ${value} of ${file.bytes.length}`)
  const sentWhileOnline = uploads.requests.length
  await sleep(1500)
  t.equal(uploads.requests.length, sentWhileOnline, 'nothing is sent while the browser is offline')
  const verifiesBefore = uploads.count('/upload/verify')

  await context.setOffline(false)
  const code = await codeOnPage(page)
  t.ok(uploads.count('/upload/verify') > verifiesBefore, 'verify asked what was missing after the drop')
  t.equal(uploads.count('/upload/start'), 1, 'the same session went on')
  t.same(counted(uploads.acked), { 0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1 }, 'every chunk stored exactly once')
  t.equal(await page.getByRole('status').textContent(), 'Upload complete.')
  t.ok((await downloadThroughPage(page, url, code)).equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems).filter(p => !/ERR_INTERNET_DISCONNECTED/.test(p)), [])
})

t.test('after a page reload the page resumes the session from localStorage when the same file is picked again', async t => {
  const { url, app } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  let chunkRequests = 0
  // Two chunks get through; then the service is unreachable (the browser still thinks it is online).
  await page.route('**/upload/chunk', async route => {
    if (++chunkRequests <= 2) await route.continue()
    else await route.abort('connectionreset')
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'backup.tar', 6 * TEST_CHUNK + 1) // 7 chunks
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByLabel('Downloads allowed').fill('4')
  await page.getByLabel('Expires after (hours)').fill('12')
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /Cannot reach the service\. Retrying in \d+ s…/ }).waitFor()
  await eventually(async () => { if (uploads.acked.length !== 2) throw new Error(`${uploads.acked.length} chunks acknowledged`) })

  const pending = JSON.parse(await page.evaluate('localStorage.getItem("dropcode.pending")') as string) as { uploadId: string, totalChunks: number, name: string }
  t.match(pending, { name: 'backup.tar', totalChunks: 7 })
  const { chunks } = await app.sessions.status(pending.uploadId, envKeyName(API_KEY))
  t.same([...chunks.keys()].sort(), [...uploads.acked].sort(), 'the service holds the two chunks')

  // Reload while the service is still unreachable, so no chunk of the old page slips through.
  await page.reload()
  const resume = page.getByRole('region', { name: 'Unfinished upload' })
  await resume.waitFor()
  await page.unroute('**/upload/chunk')
  t.match(await resume.textContent(), /The upload of backup\.tar \(6 MiB\) did not finish\. Choose the same file again/)
  const before = uploads.requests.length
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  t.match(await page.locator('#file-info').textContent(), /continues the unfinished upload/)
  t.equal(await page.getByLabel('Downloads allowed').inputValue(), '4', 'the session\'s own settings are shown')
  t.equal(await page.getByLabel('Expires after (hours)').inputValue(), '12')
  t.ok(await page.getByLabel('Downloads allowed').evaluate(el => (el as unknown as { readOnly: boolean }).readOnly), 'and cannot be changed')
  await page.getByRole('button', { name: 'Resume upload' }).click()
  const code = await codeOnPage(page)

  const after = uploads.requests.slice(before)
  t.equal(after[0], '/upload/verify', 'the resumed page starts with verify')
  t.notOk(after.includes('/upload/start'), 'no new session')
  t.equal(after.filter(p => p === '/upload/chunk').length, 5, 'only the five missing chunks were sent')
  t.same(counted(uploads.acked), { 0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1 }, 'every chunk stored exactly once')
  t.equal(await page.locator('#result-downloads').textContent(), '4')
  t.match(await page.locator('#result-expires').textContent(), /after 12 hours/)
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.pending")'), null, 'the finished session is forgotten')
  t.ok(await page.getByRole('region', { name: 'Unfinished upload' }).isHidden())
  t.ok((await downloadThroughPage(page, url, code)).equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems).filter(p => !/ERR_CONNECTION_RESET/.test(p)), [])
})

t.test('complete went through but its answer never came; after a reload the page shows the code from verify without reading the file again (web_complete_answer_lost)', async t => {
  const { url } = await start(t)
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  const lost: string[] = []
  // The service completes; the page never sees the answer (a balancer's timeout, every retry too).
  await page.route('**/upload/complete', async route => {
    lost.push(await (await route.fetch()).text())
    await route.abort('connectionreset')
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'done.tar', 2 * TEST_CHUNK + 1) // 3 chunks
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /Cannot reach the service\. Retrying in \d+ s…/ }).waitFor()
  const { code } = JSON.parse(lost[0]!) as { code: string }

  await page.reload()
  await page.getByRole('region', { name: 'Unfinished upload' }).waitFor()
  await page.unroute('**/upload/complete')
  const before = uploads.requests.length
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByRole('button', { name: 'Resume upload' }).click()
  t.equal(await codeOnPage(page), code, 'the code the lost answer had')
  t.same(uploads.requests.slice(before), ['/upload/verify'], 'one verify: no chunk, no complete')
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.pending")'), null, 'the finished session is forgotten')
  t.ok((await downloadThroughPage(page, url, code)).equals(file.bytes), 'the code gives the file')
  t.same(unexpected(problems).filter(p => !/ERR_CONNECTION_RESET/.test(p)), [])
})

t.test('a different file replaces an unfinished upload; Discard and Cancel forget it', async t => {
  const { url } = await start(t)
  const { page } = await openTab(t, browser)
  const uploads = watchUploads(page)
  await page.route('**/upload/chunk', route => route.abort('connectionreset'))
  await page.goto(url)
  await saveKey(page, API_KEY)
  const first = testFile(t, 'first.bin', 3 * TEST_CHUNK)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(first.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /Cannot reach the service/ }).waitFor()
  await page.getByRole('button', { name: 'Cancel upload' }).click()
  await page.getByRole('status').filter({ hasText: 'Upload cancelled.' }).waitFor()
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.pending")'), null, 'Cancel forgets the session')
  t.ok(await page.getByRole('button', { name: 'Upload' }).isEnabled(), 'the form is usable again')

  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /Cannot reach the service/ }).waitFor()
  await page.reload()
  await page.getByRole('region', { name: 'Unfinished upload' }).getByRole('button', { name: 'Discard it' }).click()
  await t.resolveMatch(page.evaluate('localStorage.getItem("dropcode.pending")'), null, 'Discard forgets it')
  t.ok(await page.getByRole('region', { name: 'Unfinished upload' }).isHidden())

  await page.getByLabel('Drop a file here or choose a file').setInputFiles(first.path)
  await page.getByRole('button', { name: 'Upload' }).click()
  await page.getByRole('status').filter({ hasText: /Cannot reach the service/ }).waitFor()
  await page.unroute('**/upload/chunk')
  await page.reload()
  await page.getByRole('region', { name: 'Unfinished upload' }).waitFor()
  const second = testFile(t, 'second.bin', 2 * TEST_CHUNK + 5)
  const starts = uploads.count('/upload/start')
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(second.path)
  t.equal(await page.getByRole('button', { name: /Upload/ }).textContent(), 'Upload', 'another file is a new upload')
  await page.getByRole('button', { name: 'Upload' }).click()
  const code = await codeOnPage(page)
  t.equal(uploads.count('/upload/start'), starts + 1)
  t.ok((await downloadThroughPage(page, url, code)).equals(second.bytes))
})
