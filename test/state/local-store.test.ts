import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { openLocalStateStore } from '../../src/state/local-store.js'
import { counterContract, sessionContract, sessionRecord, stateStoreContract, fileRecord } from './contract.js'
import { dataDir } from '../helpers/app.js'

const open = async (t: Test) => {
  const store = await openLocalStateStore({ dir: dataDir(t), maxRecords: 1000 })
  t.teardown(() => store.close())
  return store
}
stateStoreContract(t, open)
sessionContract(t, open)
counterContract(t, open)

t.test('a restart keeps sessions and their chunks (locks and completions are per process)', async t => {
  const dir = dataDir(t)
  const a = await openLocalStateStore({ dir, maxRecords: 100 })
  const s = sessionRecord()
  const timing = { now: Date.now(), ttlMs: 60_000, blobDeadline: Date.now() + 61_000 }
  await a.createSession(s, timing)
  await a.settleLayout(s.id, 'parts')
  await a.beginChunk(s.id, 1, Date.now() + 60_000, timing)
  await a.commitChunk(s.id, 1, JSON.stringify({ size: 9 }), timing)
  await a.beginChunk(s.id, 2, Date.now() + 60_000, timing) // in flight when the process stops
  await a.close()
  const b = await openLocalStateStore({ dir, maxRecords: 100 })
  t.teardown(() => b.close())
  t.same(await b.getSession(s.id), { session: { ...s, layout: 'parts' }, received: [1] })
  t.ok((await b.beginChunk(s.id, 2, Date.now() + 1000, timing)).ok, 'no stale lock after a restart')
})

t.test('a restart loses nothing: records, counters and the cleanup index survive', async t => {
  const dir = dataDir(t)
  const a = await openLocalStateStore({ dir, maxRecords: 100 })
  const file = fileRecord({ maxDownloads: 3 })
  await a.createFile(file, file.expiresAt + 5)
  await a.claimDownload(file.code, Date.now())
  const gone = fileRecord()
  await a.createFile(gone, gone.expiresAt)
  await a.deleteFile(gone.code, Date.now())
  await a.close()

  const b = await openLocalStateStore({ dir, maxRecords: 100 })
  t.teardown(() => b.close())
  const found = await b.lookupFile(file.code, Date.now())
  t.ok(found.ok && found.file.downloads === 1, 'download count kept')
  t.same(await b.lookupFile(gone.code, Date.now()), { ok: false, reason: 'unknown' }, 'deletion kept')
  t.same(await b.leaseDueBlobs(Date.now(), 10, Date.now() + 1000), [gone.blobKey], 'due object kept')
  await b.forgetBlob(gone.blobKey)
  t.same(await b.leaseDueBlobs(file.expiresAt + 5, 10, file.expiresAt + 6), [file.blobKey], 'object deadline kept')
})

t.test('a torn last journal line (crash mid-write) is skipped', async t => {
  const dir = dataDir(t)
  const a = await openLocalStateStore({ dir, maxRecords: 100 })
  const file = fileRecord()
  await a.createFile(file, file.expiresAt)
  await a.close()
  fs.appendFileSync(path.join(dir, 'journal.jsonl'), '{"t":"x","c":"')
  const b = await openLocalStateStore({ dir, maxRecords: 100 })
  t.teardown(() => b.close())
  t.ok((await b.lookupFile(file.code, Date.now())).ok)
})

t.test('a second process cannot open the same directory', async t => {
  const dir = dataDir(t)
  const a = await openLocalStateStore({ dir, maxRecords: 100 })
  await t.rejects(openLocalStateStore({ dir, maxRecords: 100 }), /in use by process/)
  await a.close()
  fs.writeFileSync(path.join(dir, 'lock'), '999999999') // stale lock of a dead process
  const b = await openLocalStateStore({ dir, maxRecords: 100 })
  await b.close()
})

t.test('the record count is bounded; expired records make room', async t => {
  let now = Date.now()
  const store = await openLocalStateStore({ dir: dataDir(t), maxRecords: 2, now: () => now })
  t.teardown(() => store.close())
  await store.createFile(fileRecord({ expiresAt: now + 1000 }), now)
  await store.createFile(fileRecord({ expiresAt: now + 1000 }), now)
  await t.rejects(store.createFile(fileRecord(), now), { code: 'DROPCODE_STATE_FULL' })
  now += 1000
  t.equal(await store.createFile(fileRecord({ expiresAt: now + 1000 }), now), true)
})

t.test('the journal is compacted to what is live', async t => {
  const dir = dataDir(t)
  const store = await openLocalStateStore({ dir, maxRecords: 100 })
  const file = fileRecord({ maxDownloads: 100_000 })
  await store.createFile(file, file.expiresAt)
  for (let i = 0; i < 12_000; i++) await store.claimDownload(file.code, Date.now())
  await store.close()
  const lines = fs.readFileSync(path.join(dir, 'journal.jsonl'), 'utf8').trim().split('\n')
  t.ok(lines.length < 5000, `journal has ${lines.length} lines`)
  const again = await openLocalStateStore({ dir, maxRecords: 100 })
  t.teardown(() => again.close())
  const found = await again.lookupFile(file.code, Date.now())
  t.equal(found.ok && found.file.downloads, 12_000)
})
