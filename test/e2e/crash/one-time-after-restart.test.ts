/**
 * Issue 20: after kill -9 of the embedded server during 200 uploads and a restart, blob files
 * were still on disk long after their one-time files had been downloaded once (with curl).
 * Checked the same way: real server processes on one DATA_DIR, kill -9 during uploads, a
 * restart, each answered code downloaded once with curl. What was found: the downloaded files'
 * objects were kept by the same cause as test/routes/whole-download.test.ts (curl closing
 * before the response ended); the rest on disk are uploads the crash cut, whose codes nobody was
 * answered (a `.part` file, or an object finished just before the kill), which the sweeper
 * removes on their own deadlines. The test tells them apart by content: every object left must
 * be one of the uploads that were not answered.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import t from 'tap'
import { testEnv, upload } from '../../helpers/app.js'
import { killServer, startServer } from '../../helpers/server-process.js'
import { bytes, sha256Of } from '../../helpers/streams.js'
import { dataDir } from '../../helpers/tmp.js'
import { until } from '../../helpers/until.js'

const run = promisify(execFile)
const UPLOADS = 200
const CLIENTS = 20

t.test('kill -9 during uploads, restart: every one-time file downloaded once with curl is gone within 1 s (one_time_blobs_left_after_crash)', async t => {
  const env = testEnv(t, 'fs+local', {})
  const blobs = path.join(env.DATA_DIR!, 'blobs')
  const stored = () => fs.readdirSync(blobs, { recursive: true, withFileTypes: true }).filter(e => e.isFile()).map(e => path.join(e.parentPath, e.name))
  const a = await startServer(t, env)

  const payloads = Array.from({ length: UPLOADS }, (_, i) => bytes(100_000 + i * 5_003, i + 1))
  const answered = new Map<string, Buffer>() // code → bytes
  let next = 0
  const uploads = Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < UPLOADS) {
      const data = payloads[next++]!
      try {
        const up = await upload(a.url, [['max_downloads', '1'], ['file', { data, filename: 'f.bin' }]])
        if (up.status === 200) answered.set(up.body.code, data)
      } catch { return } // the server died under this upload
    }
  }))
  await until(() => answered.size >= 60, 30_000, '60 uploads answered', 5)
  await killServer(a)
  await uploads
  t.ok(next < UPLOADS, `killed during the uploads (${answered.size} answered, ${next} started)`)

  const b = await startServer(t, env)
  const dir = dataDir(t)
  const codes = [...answered.keys()]
  for (let i = 0; i < codes.length; i += 10) {
    await Promise.all(codes.slice(i, i + 10).map(async (code, j) => {
      const out = path.join(dir, `${i + j}`)
      await run('curl', ['-fsS', '-o', out, `${b.url}/download/${code}`])
      t.equal(sha256Of(fs.readFileSync(out)), sha256Of(answered.get(code)!), `download ${i + j} whole`)
    }))
  }
  const deadline = Date.now() + 1000

  const downloaded = new Set([...answered.values()].map(sha256Of))
  const unanswered = new Set(payloads.filter(p => ![...answered.values()].includes(p)).map(sha256Of))
  const digests = () => stored().filter(f => !f.endsWith('.part')).map(f => sha256Of(fs.readFileSync(f)))
  while (digests().some(d => downloaded.has(d)) && Date.now() < deadline) await sleep(50)
  const left = digests()
  t.equal(left.filter(d => downloaded.has(d)).length, 0, 'no object of a downloaded file is left')
  t.same(left.filter(d => !unanswered.has(d)), [], 'what is left is uploads the crash cut (their codes never answered)')
  t.ok(stored().length <= CLIENTS, `at most one file per upload in flight at the kill (${stored().length})`)
})
