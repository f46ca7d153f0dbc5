/**
 * The embedded default (fs blobs + LMDB state) as an operator meets it: real server processes
 * killed with SIGKILL, restarted, sharing a DATA_DIR, and run out of disk space on a real small
 * filesystem.
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { form, missingCodes, uploadTraffic } from '../helpers/app.js'
import { killServer, startServer, stopServer, type ServerProcess } from '../helpers/server-process.js'
import { dataDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const KEY = 'embedded-key'

async function upload (server: ServerProcess, data: string | Uint8Array, fields: Array<[string, string]> = []) {
  const res = await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': KEY }, body: form([['file', { data, filename: 'f.bin' }], ...fields]) })
  return { status: res.status, body: await res.json() as { code?: string, error?: string } }
}

t.test('kill -9 during a burst of uploads loses no code that was answered', async t => {
  const dir = dataDir(t)
  const first = await startServer(t, { DATA_DIR: dir, API_KEYS: KEY })
  // 8 clients upload as fast as they can; the server is killed in the middle of it.
  const traffic = uploadTraffic(first.url, { key: KEY })
  await until(() => traffic.codes.length >= 150, 30_000, '150 uploads answered', 5)
  await killServer(first)
  await traffic.stop()
  const answered = traffic.codes
  t.ok(answered.length >= 150, `${answered.length} codes answered before the kill`)

  const second = await startServer(t, { DATA_DIR: dir, API_KEYS: KEY })
  t.same(await missingCodes(second.url, answered), [], 'every answered code survived the crash')
  t.equal(await stopServer(second), 0)
})

t.test('an unclean stop never blocks the next start (stale lock files, PID 1 in a container)', async t => {
  const dir = dataDir(t)
  // A lock file as dropcode 0.1 left it after `docker stop` killed node as PID 1: ignored.
  fs.mkdirSync(path.join(dir, 'state'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'state', 'lock'), '1')
  const a = await startServer(t, { DATA_DIR: dir, API_KEYS: KEY })
  const code = (await upload(a, 'still here')).body.code!
  await killServer(a)
  const b = await startServer(t, { DATA_DIR: dir, API_KEYS: KEY })
  t.equal(await (await fetch(`${b.url}/download/${code}`)).text(), 'still here')
  t.equal(await stopServer(b), 0)
})

t.test('two processes on one DATA_DIR share state safely: claims stay exact', async t => {
  const dir = dataDir(t)
  const [a, b] = await Promise.all([startServer(t, { DATA_DIR: dir, API_KEYS: KEY }), startServer(t, { DATA_DIR: dir, API_KEYS: KEY })])
  const code = (await upload(a, 'shared', [['max_downloads', '7']])).body.code!
  const results = await Promise.all(Array.from({ length: 100 }, async (_, i) => {
    const res = await fetch(`${(i % 2 === 0 ? a : b).url}/download/${code}`)
    return { status: res.status, body: await res.text() }
  }))
  t.equal(results.filter(r => r.status === 200 && r.body === 'shared').length, 7, 'exactly max_downloads served across both processes')
  t.equal(results.filter(r => r.status === 404).length, 93)
  t.same(await Promise.all([stopServer(a), stopServer(b)]), [0, 0])
})

t.test('kill -9 of one of two processes on one DATA_DIR in the middle of writes: the other keeps writing', async t => {
  // Both write LMDB as fast as their clients upload, so the victim is likely to die holding
  // LMDB's write lock: the survivor must get it back (LMDB's robust mutex), not wait for ever.
  const dir = dataDir(t)
  const [survivor, victim] = await Promise.all([startServer(t, { DATA_DIR: dir, API_KEYS: KEY }), startServer(t, { DATA_DIR: dir, API_KEYS: KEY })])
  const onSurvivor = uploadTraffic(survivor.url, { key: KEY, clients: 6 })
  const onVictim = uploadTraffic(victim.url, { key: KEY, clients: 6 })
  await until(() => onVictim.codes.length >= 100, 30_000, '100 uploads answered by the victim', 5)
  await killServer(victim)
  const atKill = onSurvivor.codes.length
  const deadline = Date.now() + 10_000
  while (onSurvivor.codes.length < atKill + 200 && Date.now() < deadline) await new Promise(resolve => setTimeout(resolve, 10))
  await Promise.all([onSurvivor.stop(), onVictim.stop()])
  t.ok(onSurvivor.codes.length >= atKill + 200, `the survivor answered ${onSurvivor.codes.length - atKill} uploads after the kill (200 wanted within 10 s)`)
  const answered = [...onSurvivor.codes, ...onVictim.codes]
  t.same(await missingCodes(survivor.url, answered), [], `all ${answered.length} answered codes are there, the victim's too`)
  t.equal(await stopServer(survivor), 0)
})

t.test('open sessions count toward LOCAL_STATE_MAX_RECORDS: a flood of empty starts fills the store no further (state_flood)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY, LOCAL_STATE_MAX_RECORDS: '20' })
  for (let i = 0; i < 5; i++) t.equal((await upload(server, `file ${i}`)).status, 200)
  const starts = await Promise.all(Array.from({ length: 40 }, async () => {
    const res = await fetch(`${server.url}/upload/start`, { method: 'POST', headers: { 'x-client-key': KEY }, body: form([['filename', 'f'], ['total_chunks', '1']]) })
    return { status: res.status, body: await res.json() as { code?: string } }
  }))
  t.equal(starts.filter(r => r.status === 200).length, 15, '5 files + 15 sessions = 20 records')
  t.ok(starts.filter(r => r.status !== 200).every(r => r.status === 503 && r.body.code === 'DROPCODE_STATE_FULL'))
  t.match(await upload(server, 'one more'), { status: 503, body: { code: 'DROPCODE_STATE_FULL' } }, 'sessions take room from files too')
  t.equal(await stopServer(server), 0)
})

/** Mounts a 50 MiB tmpfs (needs root); false where that is not possible. */
function mountSmallDisk (dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=50m', 'tmpfs', dir], { stdio: 'ignore' })
    return true
  } catch (err) {
    if (process.env.CI === 'true') throw new Error(`CI=true needs a small tmpfs for the full-disk test (mount as root): ${String(err)}`)
    return false
  }
}
const probe = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-mount-probe-'))
const canMount = mountSmallDisk(probe)
if (canMount) execFileSync('umount', [probe])
fs.rmSync(probe, { recursive: true, force: true })

t.test('a full disk is a 507 answer, never a corruption; service recovers when space returns', { skip: canMount ? false : 'cannot mount a tmpfs here (needs root); CI runs it' }, async t => {
  const mount = path.join(dataDir(t), 'small')
  fs.mkdirSync(mount)
  mountSmallDisk(mount)
  t.teardown(() => { execFileSync('umount', ['-l', mount]) })
  const server = await startServer(t, { DATA_DIR: mount, API_KEYS: KEY })
  const kept = (await upload(server, 'kept through it all', [['max_downloads', '5']])).body.code!

  const big = await upload(server, new Uint8Array(70 * 1024 * 1024))
  t.equal(big.status, 507, 'a 70 MiB upload into 50 MiB')
  t.match(big.body, { code: 'DROPCODE_STORAGE_FULL', error: String })
  const partial = fs.readdirSync(path.join(mount, 'blobs'), { recursive: true }).filter(f => String(f).endsWith('.part'))
  t.same(partial, [], 'no partial file left')

  // Fill the disk completely, then try small uploads: the blob or the state write fails.
  const filler = path.join(mount, 'filler')
  try { execFileSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=1M', 'count=100'], { stdio: 'ignore' }) } catch { /* ENOSPC: full */ }
  for (let i = 0; i < 4; i++) {
    const tiny = await upload(server, `tiny ${i}`)
    t.equal(tiny.status, 507, `tiny upload ${i} on a full disk`)
    t.equal(tiny.body.code, 'DROPCODE_STORAGE_FULL')
  }
  const head = await fetch(`${server.url}/download/${kept}`, { method: 'HEAD' })
  t.equal(head.status, 200, 'reads still work on a full disk')

  fs.rmSync(filler)
  const after = await upload(server, 'space is back')
  t.equal(after.status, 200, 'recovers by itself when space returns')
  t.equal(await (await fetch(`${server.url}/download/${after.body.code!}`)).text(), 'space is back')
  t.equal(await stopServer(server), 0)

  const again = await startServer(t, { DATA_DIR: mount, API_KEYS: KEY })
  t.equal(await (await fetch(`${again.url}/download/${kept}`)).text(), 'kept through it all', 'the state survived intact')
  t.equal(await stopServer(again), 0)
})
