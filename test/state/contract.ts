/**
 * The StateStore contract: every driver runs this suite (local-store.test.ts,
 * redis-store.test.ts), so routes and services can rely on one set of semantics.
 */
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { newBlobKey, newCode } from '../../src/ids.js'
import type { FileRecord, StateStore, UploadSession } from '../../src/state/index.js'

const HOUR = 3_600_000

export function fileRecord (over: Partial<FileRecord> = {}): FileRecord {
  const now = Date.now()
  return {
    code: newCode(),
    blobKey: newBlobKey(),
    filename: 'report "final" ü 🚀.txt',
    contentType: 'text/plain; charset=utf-8',
    size: 5 * 1024 ** 3 + 7,
    maxDownloads: 1,
    downloads: 0,
    createdAt: now,
    expiresAt: now + HOUR,
    ...over
  }
}

/** Runs the contract against stores made by `open` (a fresh, empty store per subtest). */
export function stateStoreContract (t: Test, open: (t: Test) => Promise<StateStore>) {
  t.test('a created file reads back field for field', async t => {
    const store = await open(t)
    const file = fileRecord()
    t.equal(await store.createFile(file, file.expiresAt), true)
    t.same(await store.lookupFile(file.code, Date.now()), { ok: true, file })
    t.same(await store.lookupFile(newCode(), Date.now()), { ok: false, reason: 'unknown' })
  })

  t.test('a taken code is not overwritten', async t => {
    const store = await open(t)
    const first = fileRecord()
    await store.createFile(first, first.expiresAt)
    const second = fileRecord({ code: first.code, filename: 'other' })
    t.equal(await store.createFile(second, second.expiresAt), false)
    const found = await store.lookupFile(first.code, Date.now())
    t.equal(found.ok && found.file.filename, first.filename)
  })

  t.test('claims stop at maxDownloads; the last one says so', async t => {
    const store = await open(t)
    const file = fileRecord({ maxDownloads: 3 })
    await store.createFile(file, file.expiresAt)
    const claims = []
    for (let i = 0; i < 4; i++) claims.push(await store.claimDownload(file.code, Date.now()))
    t.same(claims.map(c => c.ok && c.last), [false, false, true, false])
    t.same(claims.map(c => c.ok ? c.file.downloads : c.reason), [1, 2, 3, 'exhausted'])
    t.same(await store.lookupFile(file.code, Date.now()), { ok: false, reason: 'exhausted' })
    t.equal(await store.createFile(fileRecord({ code: file.code }), file.expiresAt), false, 'an exhausted code is not reused')
  })

  t.test('exactly N of many concurrent claims succeed', async t => {
    const store = await open(t)
    const file = fileRecord({ maxDownloads: 7 })
    await store.createFile(file, file.expiresAt)
    const claims = await Promise.all(Array.from({ length: 300 }, () => store.claimDownload(file.code, Date.now())))
    t.equal(claims.filter(c => c.ok).length, 7)
    t.equal(claims.filter(c => c.ok && c.last).length, 1)
  })

  t.test('an expired file cannot be read, claimed or deleted', async t => {
    const store = await open(t)
    const file = fileRecord({ maxDownloads: 5 })
    await store.createFile(file, file.expiresAt)
    const later = file.expiresAt
    t.same(await store.lookupFile(file.code, later), { ok: false, reason: 'expired' })
    t.same(await store.claimDownload(file.code, later), { ok: false, reason: 'expired' })
    t.same(await store.deleteFile(file.code, later), { ok: false, reason: 'expired' })
    t.ok((await store.lookupFile(file.code, later - 1)).ok, 'still there a millisecond before')
  })

  t.test('a record whose time has passed is gone for good', async t => {
    const store = await open(t)
    const file = fileRecord({ expiresAt: Date.now() + 150 })
    await store.createFile(file, file.expiresAt)
    await new Promise(resolve => setTimeout(resolve, 300))
    const found = await store.lookupFile(file.code, Date.now())
    t.notOk(found.ok)
  })

  t.test('a refund gives a claimed download back, never below zero', async t => {
    const store = await open(t)
    const file = fileRecord({ maxDownloads: 1 })
    await store.createFile(file, file.expiresAt)
    t.ok((await store.claimDownload(file.code, Date.now())).ok)
    await store.refundDownload(file.code)
    t.ok((await store.claimDownload(file.code, Date.now())).ok, 'claimable again')
    const other = fileRecord()
    await store.createFile(other, other.expiresAt)
    await store.refundDownload(other.code)
    const c = await store.claimDownload(other.code, Date.now())
    t.ok(c.ok && c.last, 'refund at zero did not add a download')
    await store.refundDownload(newCode()) // unknown: no error
  })

  t.test('delete removes the record once and makes its object due now', async t => {
    const store = await open(t)
    const file = fileRecord()
    await store.createFile(file, file.expiresAt)
    const now = Date.now()
    t.same(await store.leaseDueBlobs(now, 10, now + 1000), [], 'not due before the delete')
    t.same(await store.deleteFile(file.code, now), { ok: true, file })
    t.same(await store.deleteFile(file.code, now), { ok: false, reason: 'unknown' })
    t.same(await store.lookupFile(file.code, now), { ok: false, reason: 'unknown' })
    t.same(await store.leaseDueBlobs(now, 10, now + 1000), [file.blobKey])
  })

  t.test('an exhausted file cannot be deleted (it is already gone)', async t => {
    const store = await open(t)
    const file = fileRecord()
    await store.createFile(file, file.expiresAt)
    await store.claimDownload(file.code, Date.now())
    t.same(await store.deleteFile(file.code, Date.now()), { ok: false, reason: 'exhausted' })
  })

  t.test('cleanup index: due keys are leased once until the lease runs out', async t => {
    const store = await open(t)
    const now = Date.now()
    const [a, b, c] = [newBlobKey(), newBlobKey(), newBlobKey()]
    await store.scheduleBlobCleanup(a, now - 10)
    await store.scheduleBlobCleanup(b, now)
    await store.scheduleBlobCleanup(c, now + 60_000)
    t.equal(await store.countDueBlobs(now), 2)
    t.same((await store.leaseDueBlobs(now, 10, now + 5000)).sort(), [a, b].sort())
    t.same(await store.leaseDueBlobs(now, 10, now + 5000), [], 'leased keys are not handed out again')
    t.equal(await store.countDueBlobs(now), 0)
    t.same((await store.leaseDueBlobs(now + 5000, 10, now + 10_000)).sort(), [a, b].sort(), 'an expired lease is taken again')
    await store.forgetBlob(a)
    await store.forgetBlob(a)
    t.same((await store.leaseDueBlobs(now + 60_000, 10, now + 70_000)).sort(), [b, c].sort(), 'a forgotten key is never leased')
  })

  t.test('concurrent leases never share a key; limit is honoured', async t => {
    const store = await open(t)
    const now = Date.now()
    const keys = Array.from({ length: 50 }, () => newBlobKey())
    for (const k of keys) await store.scheduleBlobCleanup(k, now - 1)
    const leases = await Promise.all(Array.from({ length: 10 }, () => store.leaseDueBlobs(now, 7, now + 60_000)))
    const all = leases.flat()
    t.ok(leases.every(l => l.length <= 7))
    t.equal(new Set(all).size, all.length, 'no key leased twice')
    t.equal(all.length, 50)
  })

  t.test('createFile moves the object deadline', async t => {
    const store = await open(t)
    const file = fileRecord()
    const now = Date.now()
    await store.scheduleBlobCleanup(file.blobKey, now - 1) // pending upload, overdue
    await store.createFile(file, file.expiresAt + 1000)
    t.same(await store.leaseDueBlobs(now, 10, now + 1), [], 'published object is not due')
    t.same(await store.leaseDueBlobs(file.expiresAt + 1000, 10, file.expiresAt + 2000), [file.blobKey])
  })

  t.test('ping answers on a working store', async t => {
    const store = await open(t)
    await t.resolves(store.ping())
  })
}

export function sessionRecord (over: Partial<UploadSession> = {}): UploadSession {
  return {
    id: randomBytes(16).toString('base64url'),
    blobKey: newBlobKey(),
    handle: 'upload-handle',
    filename: 'big ✓.iso',
    totalChunks: 3,
    maxDownloads: 2,
    expiryHours: 5,
    createdAt: Date.now(),
    ...over
  }
}

/** Session semantics every driver must hold. */
export function sessionContract (t: Test, open: (t: Test) => Promise<StateStore>) {
  const timing = (ttlMs = 60_000) => { const now = Date.now(); return { now, ttlMs, blobDeadline: now + ttlMs + 1000 } }
  const receipt = (size: number, tag = 'x') => JSON.stringify({ size, tag })

  t.test('sessions: create, read back, record chunks in any order, count each index once', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    t.same(await store.getSession(s.id), { session: s, received: [] })
    for (const i of [2, 0, 2]) {
      t.ok((await store.beginChunk(s.id, i, Date.now() + 1000, timing())).ok)
      const c = await store.commitChunk(s.id, i, receipt(10 + i), timing())
      t.ok(c !== null)
    }
    const view = await store.getSession(s.id)
    t.same(view?.received, [0, 2])
    t.equal(await store.getSession('nope'), null)
  })

  t.test('sessions: commit returns the replaced receipt and the running byte total', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    await store.beginChunk(s.id, 0, Date.now() + 1000, timing())
    t.same(await store.commitChunk(s.id, 0, receipt(100, 'a'), timing()), { received: 1, previous: null, bytes: 100 })
    await store.beginChunk(s.id, 1, Date.now() + 1000, timing())
    t.same(await store.commitChunk(s.id, 1, receipt(50), timing()), { received: 2, previous: null, bytes: 150 })
    await store.beginChunk(s.id, 0, Date.now() + 1000, timing())
    t.same(await store.commitChunk(s.id, 0, receipt(70, 'b'), timing()), { received: 2, previous: receipt(100, 'a'), bytes: 120 })
  })

  t.test('sessions: one request per chunk index at a time; a failed attempt forgets the index', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    const until = Date.now() + 60_000
    const results = await Promise.all(Array.from({ length: 20 }, () => store.beginChunk(s.id, 1, until, timing())))
    t.equal(results.filter(r => r.ok).length, 1, 'exactly one holder')
    t.ok(results.filter(r => !r.ok).every(r => !r.ok && r.reason === 'locked'))
    await store.commitChunk(s.id, 1, receipt(5), timing())
    t.ok((await store.beginChunk(s.id, 1, until, timing())).ok, 'free again after commit')
    t.equal(await store.abortChunk(s.id, 1), receipt(5), 'abort hands back the earlier receipt')
    t.same((await store.getSession(s.id))?.received, [], 'and the index counts as missing')
    t.ok((await store.beginChunk(s.id, 1, Date.now() - 1, timing())).ok, 'free after abort')
    t.ok((await store.beginChunk(s.id, 1, until, timing())).ok, 'an expired lock can be taken over')
  })

  t.test('sessions: the layout is settled once', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    t.equal(await store.settleLayout(s.id, undefined), undefined, 'reading does not decide')
    const settled = await Promise.all(['parts', 'objects', 'parts', 'objects'].map(l => store.settleLayout(s.id, l)))
    t.equal(new Set(settled).size, 1, `everyone sees one layout: ${settled.join(',')}`)
    t.equal((await store.getSession(s.id))?.session.layout, settled[0])
  })

  t.test('sessions: completion is claimed by exactly one caller, then answers the code', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    await store.beginChunk(s.id, 0, Date.now() + 1000, timing())
    await store.commitChunk(s.id, 0, receipt(3), timing())
    const now = Date.now()
    const claims = await Promise.all(Array.from({ length: 10 }, () => store.beginCompletion(s.id, now, now + 60_000)))
    t.equal(claims.filter(c => c.status === 'open').length, 1)
    t.ok(claims.filter(c => c.status !== 'open').every(c => c.status === 'busy'))
    const open1 = claims.find(c => c.status === 'open')!
    t.same(open1.status === 'open' && [...open1.receipts], [[0, receipt(3)]])
    t.same(await store.beginChunk(s.id, 1, now + 1000, timing()), { ok: false, reason: 'busy' }, 'no chunks while completing')
    await store.releaseCompletion(s.id)
    t.equal((await store.beginCompletion(s.id, now, now + 60_000)).status, 'open', 'released: can complete again')
    await store.finishSession(s.id, 'AbC123', 60_000)
    t.same(await store.beginCompletion(s.id, now, now + 60_000), { status: 'done', code: 'AbC123' })
    t.equal(await store.getSession(s.id), null, 'the session is gone')
    t.same(await store.beginChunk(s.id, 0, now + 1000, timing()), { ok: false, reason: 'unknown' })
    t.same(await store.beginCompletion('unknown-session-id-xx', now, now + 1), { status: 'unknown' })
  })

  t.test('sessions: a chunk in flight blocks completion; a dead completer\'s lease runs out', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing())
    const now = Date.now()
    await store.beginChunk(s.id, 0, now + 60_000, timing())
    t.equal((await store.beginCompletion(s.id, now, now + 1000)).status, 'busy')
    await store.abortChunk(s.id, 0)
    t.equal((await store.beginCompletion(s.id, now, now + 1000)).status, 'open')
    t.equal((await store.beginCompletion(s.id, now + 500, now + 2000)).status, 'busy')
    t.equal((await store.beginCompletion(s.id, now + 1000, now + 2000)).status, 'open', 'lease expired')
  })

  t.test('sessions: an idle session expires; its object is due for cleanup', async t => {
    const store = await open(t)
    const s = sessionRecord()
    const start = timing(200)
    await store.createSession(s, start)
    await new Promise(resolve => setTimeout(resolve, 350))
    t.equal(await store.getSession(s.id), null)
    t.same(await store.beginChunk(s.id, 0, Date.now() + 1000, timing()), { ok: false, reason: 'unknown' })
    t.same(await store.leaseDueBlobs(start.blobDeadline, 10, start.blobDeadline + 1), [s.blobKey])
  })

  t.test('sessions: activity refreshes the session and its cleanup deadline', async t => {
    const store = await open(t)
    const s = sessionRecord()
    await store.createSession(s, timing(300))
    await new Promise(resolve => setTimeout(resolve, 200))
    const later = timing(300)
    await store.beginChunk(s.id, 0, Date.now() + 1000, later)
    await new Promise(resolve => setTimeout(resolve, 200))
    t.not(await store.getSession(s.id), null, 'still alive 400 ms after creation')
    t.same(await store.leaseDueBlobs(later.blobDeadline - 1, 10, later.blobDeadline), [], 'deadline moved')
  })
}

/** Rate-limit counters, same semantics in every driver. */
export function counterContract (t: Test, open: (t: Test) => Promise<StateStore>) {
  t.test('counters: fixed windows; peek does not count', async t => {
    const store = await open(t)
    t.same(await store.peekCounter('a'), { count: 0, resetMs: 0 })
    const first = await store.hitCounter('a', 300)
    t.equal(first.count, 1)
    t.ok(first.resetMs > 0 && first.resetMs <= 300)
    t.equal((await store.hitCounter('a', 300)).count, 2)
    t.equal((await store.peekCounter('a')).count, 2)
    t.equal((await store.peekCounter('a')).count, 2, 'peek adds nothing')
    t.equal((await store.hitCounter('b', 300)).count, 1, 'keys are independent')
    await new Promise(resolve => setTimeout(resolve, 350))
    t.equal((await store.peekCounter('a')).count, 0, 'window over')
    t.equal((await store.hitCounter('a', 300)).count, 1, 'a new window')
  })

  t.test('counters: concurrent hits are all counted', async t => {
    const store = await open(t)
    const results = await Promise.all(Array.from({ length: 100 }, () => store.hitCounter('c', 60_000)))
    t.same(results.map(r => r.count).sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i + 1))
  })
}
