/** SessionStore contract: sessions, chunk records, chunk locks, completion. Every driver runs it. */
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { newBlobKey } from '../../../src/core/ids.js'
import type { ChunkRecord, UploadSession } from '../../../src/core/model.js'
import type { OpenBackend } from './files.js'

export const token = () => randomBytes(12).toString('base64url')
/** The key id sessions are opened with, unless a test says otherwise. */
export const KEY = 'key-a-0123456789abcdef'

export function sessionRecord (now: number, over: Partial<UploadSession> = {}): UploadSession {
  return {
    id: randomBytes(16).toString('base64url'),
    blobKey: newBlobKey(),
    handle: 'upload-handle',
    filename: 'big ✓.iso',
    totalChunks: 3,
    maxDownloads: 2,
    expiryHours: 5,
    createdAt: now,
    sha256: '',
    keyId: KEY,
    ...over
  }
}

const chunk = (size: number, tag = 'x'): ChunkRecord => ({ size, sha256: tag.padEnd(64, '0'), receipt: JSON.stringify({ tag, size }) })
/** SHA-256 of no bytes. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

export function sessionStoreContract (t: Test, open: OpenBackend) {
  const now = Date.now()
  const TTL = 60_000

  /** Begins and commits one chunk with a fresh token. */
  async function put (sessions: Awaited<ReturnType<OpenBackend>>['sessions'], id: string, index: number, c: ChunkRecord, at = now) {
    const tk = token()
    const begun = await sessions.beginChunk(id, index, tk, at + 1000, at, TTL, KEY)
    if (!begun.ok) throw new Error(`beginChunk: ${begun.reason}`)
    return await sessions.commitChunk(id, index, tk, c, at, TTL)
  }

  t.test('sessions: create, read back, record chunks in any order, count each index once', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now, { sha256: 'f'.repeat(64) })
    await sessions.create(s, now, TTL)
    t.same(await sessions.get(s.id, now), { session: s, chunks: new Map() })
    for (const i of [2, 0, 2]) t.equal((await put(sessions, s.id, i, chunk(10 + i))).ok, true)
    const view = await sessions.get(s.id, now)
    t.same([...view!.chunks.entries()].sort((a, b) => a[0] - b[0]), [[0, chunk(10)], [2, chunk(12)]])
    t.equal(await sessions.get('nope-nope-nope-nope-xx', now), null)
  })

  t.test('sessions: a resumable (tus) upload keeps its settings and the length an append declares', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now, { totalChunks: 0, resumable: JSON.stringify({ metadata: 'filename YS5iaW4=' }) })
    await sessions.create(s, now, TTL)
    t.same((await sessions.get(s.id, now))!.session, s, 'the resumable settings read back as written')
    const declaring: ChunkRecord = { ...chunk(10, 'd'), declaresLength: 25 }
    t.equal((await put(sessions, s.id, 0, declaring)).ok, true)
    t.same((await sessions.get(s.id, now))!.chunks.get(0), declaring, 'and an append\'s declared length with its record')
  })

  t.test('sessions: commit returns the replaced record and the running byte total', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    t.same(await put(sessions, s.id, 0, chunk(100, 'a')), { ok: true, received: 1, previous: null, bytes: 100 })
    t.same(await put(sessions, s.id, 1, chunk(50)), { ok: true, received: 2, previous: null, bytes: 150 })
    t.same(await put(sessions, s.id, 0, chunk(70, 'b')), { ok: true, received: 2, previous: chunk(100, 'a'), bytes: 120 })
  })

  t.test('sessions: one lock per chunk index; a failed attempt forgets the index', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    const tokens = Array.from({ length: 20 }, token)
    const results = await Promise.all(tokens.map(tk => sessions.beginChunk(s.id, 1, tk, now + 10_000, now, TTL, KEY)))
    t.equal(results.filter(r => r.ok).length, 1, 'exactly one holder')
    t.ok(results.filter(r => !r.ok).every(r => !r.ok && r.reason === 'locked'))
    const holder = tokens[results.findIndex(r => r.ok)]!
    t.same(await sessions.commitChunk(s.id, 1, holder, chunk(5), now, TTL), { ok: true, received: 1, previous: null, bytes: 5 })
    const again = token()
    t.ok((await sessions.beginChunk(s.id, 1, again, now + 10_000, now, TTL, KEY)).ok, 'free again after commit')
    t.same(await sessions.abortChunk(s.id, 1, again, now), chunk(5), 'abort hands back the earlier record')
    t.same([...(await sessions.get(s.id, now))!.chunks.keys()], [], 'and the index counts as missing')
    t.ok((await sessions.beginChunk(s.id, 1, token(), now + 10_000, now, TTL, KEY)).ok, 'free after abort')
  })

  t.test('sessions: a dead holder\'s lock runs out; the old holder can neither extend nor commit', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    const [dead, live] = [token(), token()]
    t.ok((await sessions.beginChunk(s.id, 0, dead, now + 15_000, now, TTL, KEY)).ok)
    t.same(await sessions.beginChunk(s.id, 0, live, now + 30_000, now + 14_999, TTL, KEY), { ok: false, reason: 'locked', until: now + 15_000 }, 'locked until the lease runs out')
    t.equal(await sessions.extendChunk(s.id, 0, dead, now + 20_000, now + 1), true, 'the holder extends its lock')
    t.same(await sessions.beginChunk(s.id, 0, live, now + 30_000, now + 15_000, TTL, KEY), { ok: false, reason: 'locked', until: now + 20_000 }, 'extended')
    t.ok((await sessions.beginChunk(s.id, 0, live, now + 40_000, now + 20_000, TTL, KEY)).ok, 'taken over once it ran out')
    t.equal(await sessions.extendChunk(s.id, 0, dead, now + 50_000, now + 20_001), false, 'the old holder cannot extend')
    t.same(await sessions.commitChunk(s.id, 0, dead, chunk(1), now + 20_002, TTL), { ok: false, reason: 'lost' }, 'nor commit')
    t.same(await sessions.abortChunk(s.id, 0, dead, now + 20_003), null, 'nor abort the new holder\'s attempt')
    t.same(await sessions.commitChunk(s.id, 0, live, chunk(2), now + 20_004, TTL), { ok: true, received: 1, previous: null, bytes: 2 })
  })

  t.test('sessions: the layout is settled once', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    t.equal(await sessions.settleLayout(s.id, undefined, now), undefined, 'reading does not decide')
    const settled = await Promise.all(['parts', 'objects', 'parts', 'objects'].map(l => sessions.settleLayout(s.id, l, now)))
    t.equal(new Set(settled).size, 1, `everyone sees one layout: ${settled.join(',')}`)
    t.equal((await sessions.get(s.id, now))?.session.layout, settled[0])
  })

  t.test('sessions: completion is claimed by exactly one caller, then answers the code', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    await put(sessions, s.id, 0, chunk(3))
    const tokens = Array.from({ length: 10 }, token)
    const claims = await Promise.all(tokens.map(tk => sessions.beginCompletion(s.id, now, now + 60_000, KEY, tk, TTL)))
    t.equal(claims.filter(c => c.status === 'open').length, 1)
    t.ok(claims.filter(c => c.status !== 'open').every(c => c.status === 'busy' && c.until === now + 60_000), 'busy until the lease runs out')
    const opened = claims.find(c => c.status === 'open')!
    const holder = tokens[claims.indexOf(opened)]!
    t.same(opened.status === 'open' && [...opened.chunks], [[0, chunk(3)]])
    t.same(await sessions.beginChunk(s.id, 1, token(), now + 1000, now, TTL, KEY), { ok: false, reason: 'busy', until: now + 60_000 }, 'no chunks while completing')
    await sessions.releaseCompletion(s.id, now, token())
    t.equal((await sessions.beginCompletion(s.id, now, now + 60_000, KEY, token(), TTL)).status, 'busy', 'only the holder releases')
    await sessions.releaseCompletion(s.id, now, holder)
    t.equal((await sessions.beginCompletion(s.id, now, now + 60_000, KEY, token(), TTL)).status, 'open', 'released: can complete again')
    const result = { code: 'AbC123', size: 3, sha256: 'e'.repeat(64) }
    await sessions.finish(s.id, result, now, 60_000)
    t.same(await sessions.beginCompletion(s.id, now, now + 60_000, KEY, token(), TTL), { status: 'done', result })
    t.same(await sessions.beginCompletion(s.id, now + 60_000, now + 70_000, KEY, token(), TTL), { status: 'unknown' }, 'the code is answered for doneTtl only')
    t.equal(await sessions.get(s.id, now), null, 'the session is gone')
    t.same(await sessions.beginChunk(s.id, 0, token(), now + 1000, now, TTL, KEY), { ok: false, reason: 'unknown' })
    t.same(await sessions.beginCompletion('unknown-session-id-xx', now, now + 1, KEY, token(), TTL), { status: 'unknown' })
  })

  t.test('sessions: a finished session is described (settings, chunks without receipts, result) for doneTtl, as long as its code is answered', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    t.equal(await sessions.completed(s.id, now), null, 'an open session is not completed')
    for (const i of [2, 0, 1]) await put(sessions, s.id, i, chunk(10 + i, `c${i}`))
    t.equal((await sessions.beginCompletion(s.id, now, now + 1000, KEY, token(), TTL)).status, 'open')
    const result = { code: 'AbC123', size: 33, sha256: 'e'.repeat(64) }
    await sessions.finish(s.id, result, now, 60_000)
    const described = {
      session: { id: s.id, filename: s.filename, totalChunks: 3, maxDownloads: 2, expiryHours: 5, keyId: KEY },
      chunks: new Map([0, 1, 2].map(i => [i, { size: 10 + i, sha256: `c${i}`.padEnd(64, '0') }])),
      result
    }
    t.same(await sessions.completed(s.id, now + 59_999), described)
    t.same(await sessions.beginCompletion(s.id, now + 59_999, now + 61_000, KEY, token(), TTL), { status: 'done', result }, 'the same window answers the code')
    t.equal(await sessions.completed(s.id, now + 60_000), null, 'gone with the code')
    t.same(await sessions.beginCompletion(s.id, now + 60_000, now + 61_000, KEY, token(), TTL), { status: 'unknown' })

    await sessions.finish(s.id, result, now + 1000, 60_000)
    t.same(await sessions.completed(s.id, now + 1000), described, 'a repeated finish keeps the description and the key')
    t.equal(await sessions.completed('unknown-session-id-xx', now), null)

    const { keyId: _keyId, ...older } = sessionRecord(now, { totalChunks: 1 })
    await sessions.create(older, now, TTL)
    await sessions.finish(older.id, { code: 'XyZ789', size: 0, sha256: EMPTY_SHA256 }, now, 60_000)
    t.same(await sessions.completed(older.id, now), {
      session: { id: older.id, filename: older.filename, totalChunks: 1, maxDownloads: 2, expiryHours: 5 },
      chunks: new Map(),
      result: { code: 'XyZ789', size: 0, sha256: EMPTY_SHA256 }
    }, 'a session without a key or chunks, a result without size or digest')
  })

  t.test('sessions: a session removed after a failed completion is gone, with its chunks', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    await put(sessions, s.id, 0, chunk(3))
    await sessions.remove(s.id)
    t.equal(await sessions.get(s.id, now), null)
    t.same(await sessions.beginCompletion(s.id, now, now + 1000, KEY, token(), TTL), { status: 'unknown' })
    await sessions.create(s, now, TTL)
    t.same((await sessions.get(s.id, now))?.chunks, new Map(), 'no chunk record survived')
  })

  t.test('sessions: a chunk in flight blocks completion; a dead completer\'s lease runs out', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    const tk = token()
    await sessions.beginChunk(s.id, 0, tk, now + 10_000, now, TTL, KEY)
    t.same(await sessions.beginCompletion(s.id, now, now + 1000, KEY, token(), TTL), { status: 'busy', until: now + 10_000 }, 'busy until the chunk lock runs out')
    const first = token()
    t.equal((await sessions.beginCompletion(s.id, now + 10_000, now + 11_000, KEY, first, TTL)).status, 'open', 'a dead chunk lock does not block for ever')
    await sessions.releaseCompletion(s.id, now + 10_000, first)
    await sessions.beginChunk(s.id, 0, token(), now + 12_000, now + 10_000, TTL, KEY)
    await sessions.abortChunk(s.id, 0, tk, now + 10_000)
    const dead = token()
    t.equal((await sessions.beginCompletion(s.id, now + 12_000, now + 13_000, KEY, dead, TTL)).status, 'open')
    t.same(await sessions.beginCompletion(s.id, now + 12_500, now + 14_000, KEY, token(), TTL), { status: 'busy', until: now + 13_000 })
    const next = token()
    t.equal((await sessions.beginCompletion(s.id, now + 13_000, now + 14_000, KEY, next, TTL)).status, 'open', 'lease expired')
    t.equal(await sessions.extendCompletion(s.id, dead, now + 20_000, now + 13_001, TTL), false, 'the dead completer cannot renew the new lease')
    await sessions.releaseCompletion(s.id, now + 13_002, dead)
    t.equal((await sessions.beginCompletion(s.id, now + 13_003, now + 14_000, KEY, token(), TTL)).status, 'busy', 'nor release it')
  })

  t.test('sessions: a completion lease renewed by heartbeat holds past its first term, and the session cannot expire under it', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    const ttl = 5_000 // shorter than the completion takes
    await sessions.create(s, now, ttl)
    await put(sessions, s.id, 0, chunk(3))
    const tk = token()
    t.equal((await sessions.beginCompletion(s.id, now, now + 3_000, KEY, tk, ttl)).status, 'open')
    for (let at = now + 1_000; at <= now + 20_000; at += 1_000) {
      t.equal(await sessions.extendCompletion(s.id, tk, at + 3_000, at, ttl), true, `renewed at +${at - now} ms`)
    }
    t.same(await sessions.beginCompletion(s.id, now + 22_999, now + 30_000, KEY, token(), ttl), { status: 'busy', until: now + 23_000 }, 'still held: 23 s after a 3 s lease began')
    t.not(await sessions.get(s.id, now + 22_999), null, 'the session outlived its 5 s idle expiry while completing')
    t.ok((await sessions.objectNeededUntil(s.id, now + 20_000) ?? 0) >= now + 25_000, 'and its object is needed on')
    t.equal(await sessions.extendCompletion(s.id, tk, now + 40_000, now + 23_000, ttl), false, 'a lease not renewed in time is lost')
    t.not(await sessions.get(s.id, now + 23_000 + ttl - 1), null, 'the session of a dead completer lives an idle expiry past its lease, for another to take over')
    const next = token()
    t.equal((await sessions.beginCompletion(s.id, now + 23_000, now + 26_000, KEY, next, ttl)).status, 'open', 'another completer takes over')
    t.equal(await sessions.extendCompletion(s.id, next, now + 29_000, now + 26_000, ttl), false, 'its lease ran out too')
    t.equal(await sessions.extendCompletion('unknown-session-id-xx', next, now + 29_000, now + 24_000, ttl), false)
  })

  t.test('sessions: an idle session expires exactly; activity refreshes it', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    t.equal(await sessions.objectNeededUntil(s.id, now), now + TTL)
    await put(sessions, s.id, 0, chunk(1), now + 30_000)
    t.not(await sessions.get(s.id, now + TTL), null, 'refreshed by the chunk')
    t.equal(await sessions.objectNeededUntil(s.id, now + 30_000), now + 30_000 + TTL)
    t.equal(await sessions.get(s.id, now + 30_000 + TTL), null, 'gone at its idle expiry')
    t.same(await sessions.beginChunk(s.id, 1, token(), now + 100_000, now + 30_000 + TTL, TTL, KEY), { ok: false, reason: 'unknown' })
    t.equal(await sessions.objectNeededUntil(s.id, now + 30_000 + TTL), null)
    t.equal(await sessions.objectNeededUntil('unknown-session-id-xx', now), null)
  })

  t.test('sessions: a session answers only its own key; another key is answered as for an unknown session and changes nothing', async t => {
    const { sessions } = await open(t)
    const s = sessionRecord(now)
    await sessions.create(s, now, TTL)
    const other = 'key-b-0123456789abcdef'
    t.same(await sessions.beginChunk(s.id, 0, token(), now + 10_000, now + 1000, TTL, other), { ok: false, reason: 'unknown' })
    t.equal(await sessions.objectNeededUntil(s.id, now), now + TTL, 'the other key did not refresh the session')
    t.same(await sessions.beginCompletion(s.id, now, now + 60_000, other, token(), TTL), { status: 'unknown' })
    t.equal((await put(sessions, s.id, 0, chunk(3))).ok, true, 'no lock or lease was taken: the owner goes on')
    t.equal((await sessions.beginCompletion(s.id, now, now + 60_000, KEY, token(), TTL)).status, 'open')
    t.equal((await sessions.get(s.id, now))?.session.keyId, KEY, 'the session names its key')
    const result = { code: 'AbC123', size: 3, sha256: 'e'.repeat(64) }
    await sessions.finish(s.id, result, now, 60_000)
    t.same(await sessions.beginCompletion(s.id, now, now + 60_000, other, token(), TTL), { status: 'unknown' }, 'nor is its code answered to another key')
    t.same(await sessions.beginCompletion(s.id, now, now + 60_000, KEY, token(), TTL), { status: 'done', result })

    const { keyId: _keyId, ...older } = sessionRecord(now)
    await sessions.create(older, now, TTL)
    t.same(await sessions.beginChunk(older.id, 0, token(), now + 1000, now, TTL, other), { ok: false, reason: 'unknown' }, 'a session of dropcode 0.1 (no key) answers no key')
    t.same(await sessions.beginCompletion(older.id, now, now + 1000, KEY, token(), TTL), { status: 'unknown' }, 'not even to complete it')
  })

  t.test('sessions: a key holds at most `max` places, also under concurrency; finish, remove, release and expiry free them, activity keeps them', async t => {
    const { sessions } = await open(t)
    const fresh = () => sessionRecord(now).id
    const ids = Array.from({ length: 30 }, fresh)
    const granted = await Promise.all(ids.map(id => sessions.reserve(KEY, id, now + TTL, now, 10)))
    t.equal(granted.filter(Boolean).length, 10, 'exactly 10 of 30 concurrent reservations')
    const held = ids.filter((_, i) => granted[i])
    t.equal(await sessions.reserve('key-b-0123456789abcdef', fresh(), now + TTL, now, 10), true, 'another key has its own places')
    const made = held.slice(0, 8).map(id => sessionRecord(now, { id }))
    for (const s of made) await sessions.create(s, now, TTL)
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), false, 'all 10 taken')
    await sessions.release(KEY, held[8]!)
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), true, 'a released place is free')
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), false, 'and taken again')
    await sessions.finish(made[0]!.id, { code: 'AbC123', size: 0, sha256: EMPTY_SHA256 }, now, 60_000)
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), true, 'a finished session\'s place is free')
    await sessions.remove(made[1]!.id)
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), true, 'a removed session\'s place is free')
    t.equal(await sessions.reserve(KEY, fresh(), now + TTL, now, 10), false)
    await put(sessions, made[2]!.id, 0, chunk(1), now + 30_000)
    const later = now + TTL
    const again = []
    for (let i = 0; i < 10; i++) again.push(await sessions.reserve(KEY, fresh(), later + TTL, later, 10))
    t.same(again.filter(Boolean).length, 9, 'idle past their expiry, places are free; the active session keeps its own')
  })
}
