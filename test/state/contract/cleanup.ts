/** CleanupIndex contract: deadlines, owners, leases. Every driver runs it. */
import type { Test } from 'tap'
import { newBlobKey } from '../../../src/core/ids.js'
import { fileOwner, pendingOwner, sessionOwner } from '../../../src/core/model.js'
import type { OpenBackend } from './files.js'

export function cleanupIndexContract (t: Test, open: OpenBackend) {
  const now = Date.now()

  t.test('cleanup: due keys are leased once until the lease runs out; forgotten keys never', async t => {
    const { cleanup } = await open(t)
    const [a, b, c] = [newBlobKey(), newBlobKey(), newBlobKey()]
    await cleanup.schedule(a, now - 10)
    await cleanup.schedule(b, now)
    await cleanup.schedule(c, now + 60_000)
    t.equal(await cleanup.countDue(now), 2)
    const keys = (leased: Array<{ blobKey: string }>) => leased.map(d => d.blobKey).sort()
    t.same(keys(await cleanup.lease(now, 10, now + 5000)), [a, b].sort())
    t.same(await cleanup.lease(now, 10, now + 5000), [], 'leased keys are not handed out again')
    t.equal(await cleanup.countDue(now), 0)
    t.same(keys(await cleanup.lease(now + 5000, 10, now + 10_000)), [a, b].sort(), 'an expired lease is taken again')
    await cleanup.forget(a)
    await cleanup.forget(a)
    t.same(keys(await cleanup.lease(now + 60_000, 10, now + 70_000)), [b, c].sort(), 'a forgotten key is never leased')
  })

  t.test('cleanup: owners accumulate and come back with the lease', async t => {
    const { cleanup } = await open(t)
    const k = newBlobKey()
    await cleanup.schedule(k, now + 1000, sessionOwner('S'.repeat(22)))
    await cleanup.schedule(k, now + 2000, fileOwner('AbC123'))
    await cleanup.schedule(k, now - 1, fileOwner('AbC123'))
    const [due] = await cleanup.lease(now, 10, now + 5000)
    t.equal(due?.blobKey, k)
    t.same([...due!.owners].sort(), [fileOwner('AbC123'), sessionOwner('S'.repeat(22))].sort(), 'each owner once')
    await cleanup.forget(k)
    await cleanup.schedule(k, now - 1)
    t.same(await cleanup.lease(now, 10, now + 5000), [{ blobKey: k, owners: [] }], 'forget drops the owners too')
  })

  t.test('cleanup: concurrent leases never share a key; the limit is honoured', async t => {
    const { cleanup } = await open(t)
    const keys = Array.from({ length: 50 }, () => newBlobKey())
    for (const k of keys) await cleanup.schedule(k, now - 1)
    const leases = await Promise.all(Array.from({ length: 10 }, () => cleanup.lease(now, 7, now + 60_000)))
    const all = leases.flat().map(d => d.blobKey)
    t.ok(leases.every(l => l.length <= 7))
    t.equal(new Set(all).size, all.length, 'no key leased twice')
    t.equal(all.length, 50)
  })

  t.test('cleanup: a pending publish is confirmed once, unless it was given up first', async t => {
    const { cleanup } = await open(t)
    const [a, b, c] = [newBlobKey(), newBlobKey(), newBlobKey()]
    const session = sessionOwner('S'.repeat(22))
    await cleanup.schedule(a, now - 1, session)
    await cleanup.schedule(a, now - 1, pendingOwner('AbC123'))
    t.equal(await cleanup.confirm(a, now + 60_000, 'AbC123'), true)
    t.equal(await cleanup.confirm(a, now + 60_000, 'AbC123'), false, 'confirmed once')
    t.same(await cleanup.lease(now, 10, now + 1), [], 'the confirm moved the deadline')
    const [due] = await cleanup.lease(now + 60_000, 10, now + 70_000)
    t.same([...due!.owners].sort(), [fileOwner('AbC123'), session].sort(), 'the pending owner became the record')

    await cleanup.schedule(b, now + 60_000, pendingOwner('XyZ789'))
    await cleanup.abandon(b, 'XyZ789', now)
    t.equal(await cleanup.confirm(b, now + 60_000, 'XyZ789'), false, 'an abandoned publish cannot be confirmed')
    await cleanup.schedule(c, now - 1, pendingOwner('QqQ111'))
    const byKey = <T extends { blobKey: string }>(list: T[]) => list.sort((x, y) => x.blobKey < y.blobKey ? -1 : 1)
    t.same(byKey(await cleanup.lease(now, 10, now + 5000)), byKey([{ blobKey: b, owners: ['x:XyZ789'] }, { blobKey: c, owners: ['x:QqQ111'] }]),
      'abandoned: due now, given up; a lease gives up a pending publish')
    t.equal(await cleanup.confirm(c, now + 60_000, 'QqQ111'), false, 'a publish a sweeper leased cannot be confirmed')
    await cleanup.schedule(a, now - 1)
    await cleanup.abandon(a, 'AbC123', now)
    const [again] = await cleanup.lease(now, 10, now + 5000)
    t.same([...again!.owners].sort(), ['x:AbC123', session].sort(), 'abandon gives up a confirmed publish too, and keeps the session')
  })

  t.test('cleanup: release undoes exactly one lease', async t => {
    const { cleanup } = await open(t)
    const [a, b] = [newBlobKey(), newBlobKey()]
    await cleanup.schedule(a, now - 2)
    t.equal((await cleanup.lease(now, 1, now + 5001)).length, 1)
    t.equal((await cleanup.lease(now, 1, now + 5002)).length, 0)
    await cleanup.schedule(b, now - 1)
    t.equal((await cleanup.lease(now, 1, now + 5002)).length, 1)
    await cleanup.release(now + 5001, now)
    t.same(await cleanup.lease(now, 10, now + 6000), [{ blobKey: a, owners: [] }], 'only the released lease is due again')
  })

  t.test('cleanup: a later schedule moves the deadline either way', async t => {
    const { cleanup } = await open(t)
    const k = newBlobKey()
    await cleanup.schedule(k, now - 1)
    await cleanup.schedule(k, now + 10_000)
    t.same(await cleanup.lease(now, 10, now + 1), [], 'moved later')
    await cleanup.schedule(k, now)
    t.equal((await cleanup.lease(now, 10, now + 1)).length, 1, 'moved earlier')
  })
}
