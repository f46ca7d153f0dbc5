/**
 * The web page on the scaled setup (S3 + Redis; a real S3 such as radosgw enforces the 5 MiB
 * part minimum): with the service's default limits the page sends 8 MiB chunks, which go
 * straight into multipart parts; a chunk cut on the way is sent again after verify.
 */
import t from 'tap'
import { API_KEY, startApp, testConfig } from '../../helpers/app.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { downloadThroughPage, launchBrowser, openTab, saveKey, testFile, unexpected, uploadThroughPage, watchUploads } from './browser.js'

const MiB = 1024 * 1024
const [redis, s3, browser] = await Promise.all([startRedis(), startS3(), launchBrowser(t)])
t.teardown(async () => { await redis.stop(); await s3.stop() })
t.comment(`S3 endpoint: ${s3.kind}`)

t.test('default limits on S3: 8 MiB chunks as multipart parts, a cut chunk sent again, the bytes intact', async t => {
  const { url } = await startApp(t, testConfig(t, 's3+redis', { redis, s3 }))
  const { page, problems } = await openTab(t, browser)
  const uploads = watchUploads(page)
  const sizes: number[] = []
  let cut = false
  await page.route('**/upload/chunk', async route => {
    sizes.push(route.request().postDataBuffer()?.length ?? 0)
    if (!cut && sizes.length === 2) {
      cut = true
      await route.abort('connectionreset')
    } else {
      await route.continue()
    }
  })
  await page.goto(url)
  await saveKey(page, API_KEY)
  const file = testFile(t, 'image.raw', 17 * MiB)
  const code = await uploadThroughPage(page, file.path)
  t.equal(uploads.count('/upload/start'), 1)
  t.same([...uploads.acked].sort(), [0, 1, 2], 'three chunks (8 + 8 + 1 MiB), each stored once')
  t.equal(uploads.count('/upload/chunk'), 4, 'the cut one was sent again')
  t.ok(sizes.filter(n => n > 8 * MiB).length >= 2, 'chunks of 8 MiB (plus their multipart framing)')
  t.equal(await page.locator('#result-sha256').textContent(), file.sha256)
  t.ok((await downloadThroughPage(page, url, code)).equals(file.bytes), 'downloaded bytes are the uploaded ones')
  t.same(unexpected(problems).filter(p => !/ERR_CONNECTION_RESET/.test(p)), [])
})
