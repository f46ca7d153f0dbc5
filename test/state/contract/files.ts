/**
 * FileStore contract: records, claims, resume windows, refunds. Every driver runs it. Time is
 * passed explicitly (`now`), so nothing here sleeps.
 */
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { newBlobKey, newCode } from '../../../src/core/ids.js'
import type { FileRecord } from '../../../src/core/model.js'
import type { StateBackend } from '../../../src/state/types.js'

const HOUR = 3_600_000
export const claimId = () => randomBytes(16).toString('base64url')

export function fileRecord (now: number, over: Partial<FileRecord> = {}): FileRecord {
  return {
    code: newCode(),
    blobKey: newBlobKey(),
    filename: 'report "final" ü 🚀.txt',
    contentType: 'text/plain; charset=utf-8',
    size: 5 * 1024 ** 3 + 7,
    sha256: 'a'.repeat(64),
    maxDownloads: 1,
    downloads: 0,
    createdAt: now,
    expiresAt: now + HOUR,
    retainUntil: now + HOUR + 600_000,
    ...over
  }
}

export type OpenBackend = (t: Test) => Promise<StateBackend>

export function fileStoreContract (t: Test, open: OpenBackend) {
  const now = Date.now()

  t.test('files: a created record reads back field for field', async t => {
    const { files } = await open(t)
    const file = fileRecord(now)
    t.equal(await files.create(file, now), true)
    t.same(await files.lookup(file.code, now), { ok: true, file })
    t.same(await files.lookup(newCode(), now), { ok: false, reason: 'unknown' })
  })

  t.test('files: keyName round-trips when given, and is absent when not', async t => {
    const { files } = await open(t)
    const owned = fileRecord(now, { keyName: 'team-a.ci_1' })
    t.equal(await files.create(owned, now), true)
    t.same(await files.lookup(owned.code, now), { ok: true, file: owned })
    const claimed = await files.claim(owned.code, claimId(), now, now + 1000)
    t.equal(claimed.ok && claimed.file.keyName, 'team-a.ci_1', 'claims answer it too')
    const anonymous = fileRecord(now)
    await files.create(anonymous, now)
    const found = await files.lookup(anonymous.code, now)
    t.ok(found.ok && !('keyName' in found.file), 'no keyName field at all')
    t.same(found, { ok: true, file: anonymous })
  })

  t.test('files: retract removes the record of its object, never another object\'s', async t => {
    const { files } = await open(t)
    const file = fileRecord(now)
    await files.create(file, now)
    await files.retract(file.code, newBlobKey(), file.retainUntil, now)
    t.same(await files.lookup(file.code, now), { ok: true, file }, 'another object: left alone')
    await files.retract(file.code, file.blobKey, file.retainUntil, now)
    await files.retract(file.code, file.blobKey, file.retainUntil, now)
    t.same(await files.lookup(file.code, now), { ok: false, reason: 'unknown' })
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now), null)
    t.same(await files.claim(file.code, claimId(), now, now + HOUR), { ok: false, reason: 'unknown' })
    t.same(await files.delete(file.code, now), { ok: false, reason: 'unknown' })
  })

  t.test('files: a taken code is not overwritten, until its record is no longer retained', async t => {
    const { files } = await open(t)
    const first = fileRecord(now)
    await files.create(first, now)
    t.equal(await files.create(fileRecord(now, { code: first.code, filename: 'other' }), now), false)
    t.equal(await files.create(fileRecord(now, { code: first.code }), first.expiresAt), false, 'taken while retained after expiry')
    const found = await files.lookup(first.code, now)
    t.equal(found.ok && found.file.filename, first.filename)
    const later = first.retainUntil
    t.equal(await files.create(fileRecord(later, { code: first.code, filename: 'new' }), later), true, 'free once retention ends')
    const again = await files.lookup(first.code, later)
    t.equal(again.ok && again.file.filename, 'new')
  })

  t.test('files: claims stop at maxDownloads; the last one says so', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 3 })
    await files.create(file, now)
    const claims = []
    for (let i = 0; i < 4; i++) claims.push(await files.claim(file.code, claimId(), now, now + 1000))
    t.same(claims.map(c => c.ok && c.last), [false, false, true, false])
    t.same(claims.map(c => c.ok ? c.file.downloads : c.reason), [1, 2, 3, 'exhausted'])
    t.same(await files.lookup(file.code, now), { ok: false, reason: 'exhausted' })
    t.equal(await files.create(fileRecord(now, { code: file.code }), now), false, 'an exhausted code is not reused')
  })

  t.test('files: exactly N of many concurrent claims succeed', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 7 })
    await files.create(file, now)
    const claims = await Promise.all(Array.from({ length: 300 }, () => files.claim(file.code, claimId(), now, now + 1000)))
    t.equal(claims.filter(c => c.ok).length, 7)
    t.equal(claims.filter(c => c.ok && c.last).length, 1)
  })

  t.test('files: expiry is exact; an expired file cannot be read, claimed or deleted', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 5 })
    await files.create(file, now)
    const at = file.expiresAt
    t.ok((await files.lookup(file.code, at - 1)).ok, 'live a millisecond before')
    t.same(await files.lookup(file.code, at), { ok: false, reason: 'expired' })
    t.same(await files.claim(file.code, claimId(), at, at + 1000), { ok: false, reason: 'expired' })
    t.same(await files.delete(file.code, at), { ok: false, reason: 'expired' })
    t.same(await files.lookup(file.code, file.retainUntil), { ok: false, reason: 'unknown' }, 'unknown once retention ends')
  })

  t.test('files: a cut claim resumes within its window, counting nothing; an ended one does not', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 1 })
    await files.create(file, now)
    const id = claimId()
    const c = await files.claim(file.code, id, now, file.retainUntil)
    t.ok(c.ok && c.last)
    t.equal(await files.endClaim(file.code, id, now + 1, now + 5000), now + 5000, 'cut: the object is kept for the resume window')
    t.equal((await files.resume(file.code, id, now + 10))?.code, file.code, 'resumable though exhausted')
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now + 11), file.retainUntil, 'kept while the resumed download streams')
    t.equal(await files.endClaim(file.code, id, now + 20, now + 100), now + 100, 'cut again: a new window')
    t.equal((await files.resume(file.code, id, now + 30))?.downloads, 1, 'resuming counts nothing')
    await files.endClaim(file.code, id, now + 40, now + 100)
    t.equal(await files.resume(file.code, claimId(), now + 50), null, 'an unknown claim id does not resume')
    t.equal(await files.resume(newCode(), id, now + 50), null, 'a claim id of another file does not resume')
    t.equal(await files.resume(file.code, id, now + 100), null, 'not after its window')
    const other = fileRecord(now, { maxDownloads: 1 })
    await files.create(other, now)
    const id2 = claimId()
    await files.claim(other.code, id2, now, other.retainUntil)
    t.equal(await files.endClaim(other.code, id2, now + 1), null, 'last claim ended, file exhausted: object not needed')
    t.equal(await files.resume(other.code, id2, now + 2), null, 'an ended claim does not resume')
    t.equal(await files.endClaim(other.code, id2, now + 3, now + 5000), null, 'an ended claim cannot be kept again')
  })

  t.test('files: the object is needed while the file is live or a claim may resume', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 2 })
    await files.create(file, now)
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now), file.retainUntil, 'live: until retention ends')
    t.equal(await files.objectNeededUntil(file.code, newBlobKey(), now), null, 'another object is not this record\'s')
    const [a, b] = [claimId(), claimId()]
    await files.claim(file.code, a, now, now + 7000)
    await files.claim(file.code, b, now, file.retainUntil)
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now + 1), file.retainUntil, 'exhausted: while a download streams')
    t.equal(await files.endClaim(file.code, b, now + 1, now + 9000), now + 9000, 'cut: until the latest claim window')
    t.equal(await files.endClaim(file.code, b, now + 2), now + 7000, 'ending one claim: the other still needs it')
    t.equal(await files.endClaim(file.code, a, now + 3), null, 'ending the last: not needed')
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now + 4), null)
    t.equal(await files.objectNeededUntil(newCode(), file.blobKey, now), null, 'unknown record')
  })

  t.test('files: a refund gives a claimed download back once; a refund before its claim cancels it', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 1 })
    await files.create(file, now)
    const id = claimId()
    t.ok((await files.claim(file.code, id, now, now + 1000)).ok)
    await files.refund(file.code, id, now)
    await files.refund(file.code, id, now)
    t.equal(await files.resume(file.code, id, now), null, 'a refunded claim does not resume')
    const again = await files.claim(file.code, claimId(), now, now + 1000)
    t.ok(again.ok && again.last && again.file.downloads === 1, 'refunded exactly once')
    const other = fileRecord(now, { maxDownloads: 2 })
    await files.create(other, now)
    const early = claimId()
    await files.refund(other.code, early, now) // the claim's answer was lost; it may still arrive
    t.same(await files.claim(other.code, early, now, now + 1000), { ok: false, reason: 'unknown' }, 'the late claim takes nothing')
    const found = await files.lookup(other.code, now)
    t.equal(found.ok && found.file.downloads, 0)
    await files.refund(newCode(), claimId(), now) // unknown code: no error
  })

  t.test('files: concurrent claims and refunds of the same ids keep the count exact', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { maxDownloads: 50 })
    await files.create(file, now)
    const ids = Array.from({ length: 40 }, claimId)
    await Promise.all(ids.flatMap(id => [files.claim(file.code, id, now, now + 1000), files.refund(file.code, id, now), files.refund(file.code, id, now)]))
    const found = await files.lookup(file.code, now)
    t.equal(found.ok && found.file.downloads, 0, 'every claim was undone exactly once, whichever came first')
  })

  t.test('files: delete removes a live record once; exhausted or expired files are already gone', async t => {
    const { files } = await open(t)
    const file = fileRecord(now)
    await files.create(file, now)
    t.same(await files.delete(file.code, now), { ok: true, file })
    t.same(await files.delete(file.code, now), { ok: false, reason: 'unknown' })
    t.same(await files.lookup(file.code, now), { ok: false, reason: 'unknown' })
    t.equal(await files.objectNeededUntil(file.code, file.blobKey, now), null)
    const used = fileRecord(now)
    await files.create(used, now)
    await files.claim(used.code, claimId(), now, now + 1000)
    t.same(await files.delete(used.code, now), { ok: false, reason: 'exhausted' })
  })

  t.test('files: what a claim serves is charged against a limit, starting at the file\'s size; unsent bytes come off (claim_etag_reserves)', async t => {
    const { files } = await open(t)
    const file = fileRecord(now, { size: 1000 })
    await files.create(file, now)
    const id = claimId()
    await files.claim(file.code, id, now, file.retainUntil)
    t.equal(await files.charge(file.code, id, 1000, 2000, now), true, 'the whole file again: 2000 of 2000')
    t.equal(await files.charge(file.code, id, 1, 2000, now), false, 'one byte more is over the limit')
    t.equal(await files.endClaim(file.code, id, now, now + 5000, 600) !== null, true, 'cut with 600 bytes unsent')
    t.equal(await files.charge(file.code, id, 601, 2000, now + 1), false, 'nothing charged when over')
    t.equal(await files.charge(file.code, id, 600, 2000, now + 1), true, 'the unsent 600 can be served again')
    t.equal(await files.charge(file.code, id, 1, 2000, now + 1), false)
    t.equal(await files.charge(file.code, claimId(), 1, 1e12, now + 1), false, 'an unknown claim is charged nothing')
    t.equal(await files.charge(newCode(), id, 1, 1e12, now + 1), false, 'nor a claim of another file')
    t.equal(await files.charge(file.code, id, 0, 1e12, now + 5000), false, 'nor one past its window')

    const other = fileRecord(now, { size: 100, maxDownloads: 2 })
    await files.create(other, now)
    const [a, b] = [claimId(), claimId()]
    await files.claim(other.code, a, now, other.retainUntil)
    await files.claim(other.code, b, now, other.retainUntil)
    const charged = await Promise.all(Array.from({ length: 120 }, (_, i) => files.charge(other.code, i % 2 === 0 ? a : b, 1, 150, now)))
    t.equal(charged.filter(Boolean).length, 100, 'concurrent charges stop exactly at each claim\'s limit (50 bytes each)')
    await files.endClaim(other.code, a, now)
    t.equal(await files.charge(other.code, a, 0, 1e12, now), false, 'an ended claim is charged nothing')
    await files.refund(other.code, b, now)
    t.equal(await files.charge(other.code, b, 0, 1e12, now), false, 'nor a refunded one')
  })
}
