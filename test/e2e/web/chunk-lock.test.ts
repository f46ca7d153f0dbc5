/**
 * Issue 20, in a real browser: a chunk the page sends while another request holds its lock (as
 * one whose instance died would, until its lease runs out) is answered 409 with Retry-After, the
 * lease left. The page waits that long (not its own backoff), then finishes the upload.
 */
import t from 'tap'
import { API_KEY, startApp, testConfig } from '../../helpers/app.js'
import { slowChunk } from '../../helpers/slow-chunk.js'
import { codeOnPage, downloadThroughPage, launchBrowser, openTab, saveKey, TEST_CHUNK, testFile, unexpected, watchUploads } from './browser.js'

const browser = await launchBrowser(t)
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

t.test('a chunk locked by another request: the page waits out the 409\'s Retry-After and finishes', async t => {
  const LEASE_S = 4 // CHUNK_LOCK_SECONDS, renewed every 4/3 s by the holder
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CHUNK_SIZE: String(TEST_CHUNK), CHUNK_LOCK_SECONDS: String(LEASE_S) }))
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  const file = testFile(t, 'locked.bin', 3 * TEST_CHUNK - 999) // 3 chunks
  const piece = file.bytes.subarray(TEST_CHUNK, 2 * TEST_CHUNK)
  const answers: Array<{ status: number, retryAfter: string | null }> = []
  let holder: ReturnType<typeof slowChunk> | undefined
  await page.route('**/upload/chunk', async route => {
    const body = route.request().postDataBuffer()?.toString('latin1') ?? ''
    const id = /name="upload_id"\r\n\r\n([A-Za-z0-9_-]{22})\r\n/.exec(body)?.[1]
    if (holder === undefined && /name="chunk_index"\r\n\r\n1\r\n/.test(body) && id !== undefined) {
      // Another request takes chunk 1's lock first and streams half of it, then goes quiet.
      holder = slowChunk(url, id, 1)
      await holder.write(piece.subarray(0, TEST_CHUNK / 2))
      await sleep(500)
    }
    const res = await route.fetch()
    answers.push({ status: res.status(), retryAfter: res.headers()['retry-after'] ?? null })
    await route.fulfill({ response: res })
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  await page.getByLabel('Drop a file here or choose a file').setInputFiles(file.path)
  await page.getByRole('button', { name: 'Upload' }).click()

  // The page's own first backoff is under 1 s (api/retry.ts): "Retrying in 2–5 s" can only be
  // the lease left (plus up to 0.5 s of jitter).
  await page.getByRole('status').filter({ hasText: /The service is busy with this upload \(409\)\. Retrying in [2-5] s…/ }).waitFor({ timeout: 15_000 })
  const refused = answers.find(a => a.status === 409)
  t.ok(refused !== undefined && Number(refused.retryAfter) >= 2 && Number(refused.retryAfter) <= LEASE_S, `409 with Retry-After ${String(refused?.retryAfter)} s (lease ${LEASE_S} s)`)
  // The holder finishes its chunk (the same bytes, all of them: the page declares chunk_size) while the page waits.
  await holder!.write(piece.subarray(TEST_CHUNK / 2))
  t.equal((await holder!.end()).status, 200)

  const code = await codeOnPage(page)
  t.equal(uploads.count('/upload/start'), 1, 'the same session went on')
  t.ok((await downloadThroughPage(page, url, code)).equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems), [])
})
