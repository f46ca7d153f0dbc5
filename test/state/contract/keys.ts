/**
 * KeyStore contract: API keys as data (secrets by hash, rotation with a grace period, revocation,
 * expiry) and each key's ledger of stored bytes (items with an end, quotas). Every driver runs
 * it. Time is passed explicitly (`now`), so nothing here sleeps.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { ApiKeyRecord } from '../../../src/core/model.js'
import type { OpenBackend } from './files.js'

const HOUR = 3_600_000
/** Hex SHA-256 of a fresh secret. */
export const secretHash = () => createHash('sha256').update(randomBytes(32)).digest('hex')

export function keyRecord (name: string, now: number, over: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return { name, admin: false, createdAt: now, limits: { quotaBytes: 5 * 1024 ** 4 + 3, maxDownloads: 10 }, secrets: { [secretHash()]: 0 }, ...over }
}

const hashOf = (key: ApiKeyRecord) => Object.keys(key.secrets)[0]!

export function keyStoreContract (t: Test, open: OpenBackend) {
  const now = Date.now()

  t.test('keys: a created key reads back whole, by name, in the list and by its secret', async t => {
    const { keys } = await open(t)
    const key = keyRecord('alpha', now, { admin: true, expiresAt: now + HOUR, createdAt: now - 5 })
    t.equal(await keys.create(key, now), true)
    t.same(await keys.get('alpha'), key)
    t.same(await keys.find(hashOf(key), now), key)
    t.equal(await keys.get('beta'), null)
    t.equal(await keys.find(secretHash(), now), null, 'an unknown secret opens nothing')
    t.same(await keys.list(), [key])
    const plain = keyRecord('plain', now, { limits: {} })
    await keys.create(plain, now)
    t.same(await keys.get('plain'), plain, 'no expiresAt, no limits: read back as stored')
    t.notOk('expiresAt' in (await keys.get('plain'))!, 'an absent expiresAt stays absent')
  })

  t.test('keys: a taken name or secret hash creates nothing', async t => {
    const { keys } = await open(t)
    const first = keyRecord('alpha', now)
    await keys.create(first, now)
    t.equal(await keys.create(keyRecord('alpha', now), now), false, 'name taken')
    t.same(await keys.get('alpha'), first)
    const fresh = secretHash()
    const clash = keyRecord('beta', now, { secrets: { [fresh]: 0, [hashOf(first)]: 0 } })
    t.equal(await keys.create(clash, now), false, 'one of its hashes is another key\'s')
    t.equal(await keys.get('beta'), null, 'nothing written')
    t.equal(await keys.find(fresh, now), null, 'not even its free hash')
    t.same(await keys.find(hashOf(first), now), first, 'the hash still opens its own key')
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => keys.create(keyRecord(`race${i}`, now, { secrets: { [fresh]: 0 } }), now)))
    t.equal(results.filter(Boolean).length, 1, 'of concurrent creates with one hash, one wins')
  })

  t.test('keys: list is by name', async t => {
    const { keys } = await open(t)
    for (const name of ['m', 'B', 'a.1', 'a-2', 'z_9', 'A']) await keys.create(keyRecord(name, now), now)
    t.same((await keys.list()).map(k => k.name), ['A', 'B', 'a-2', 'a.1', 'm', 'z_9'])
  })

  t.test('keys: expiresAt and a secret\'s own end are exact', async t => {
    const { keys } = await open(t)
    const key = keyRecord('alpha', now, { expiresAt: now + 1000 })
    await keys.create(key, now)
    t.ok(await keys.find(hashOf(key), now + 999), 'a millisecond before')
    t.equal(await keys.find(hashOf(key), now + 1000), null, 'refused from expiresAt')
    t.same(await keys.get('alpha'), key, 'get still reads an expired key')
    const [ending, endless] = [secretHash(), secretHash()]
    await keys.create(keyRecord('beta', now, { secrets: { [ending]: now + 500, [endless]: 0 } }), now)
    t.ok(await keys.find(ending, now + 499))
    t.equal(await keys.find(ending, now + 500), null, 'a secret is refused from its end')
    t.ok(await keys.find(endless, now + 10 * HOUR), 'a secret without end')
  })

  t.test('keys: a rotated key opens with both secrets until the grace ends, then only with the new one', async t => {
    const { keys } = await open(t)
    const key = keyRecord('alpha', now)
    const old = hashOf(key)
    await keys.create(key, now)
    const fresh = secretHash()
    const rotated = await keys.rotate('alpha', fresh, now + 1000, now)
    t.same(rotated, { ...key, secrets: { [old]: now + 1000, [fresh]: 0 } })
    t.same(await keys.get('alpha'), rotated)
    t.same(await keys.find(old, now + 999), rotated, 'the old secret within its grace')
    t.same(await keys.find(fresh, now + 999), rotated)
    t.equal(await keys.find(old, now + 1000), null, 'the old secret after its grace')
    t.same(await keys.find(fresh, now + 1000), rotated, 'the new one still')

    const third = secretHash()
    const again = await keys.rotate('alpha', third, now + 5000, now + 10)
    t.same(again?.secrets, { [old]: now + 1000, [fresh]: now + 5000, [third]: 0 }, 'a secret keeps its earlier end')
    const last = secretHash()
    const after = await keys.rotate('alpha', last, now + 9000, now + 2000)
    t.same(after?.secrets, { [fresh]: now + 5000, [third]: now + 9000, [last]: 0 }, 'ended secrets are forgotten')
    t.equal(await keys.create(keyRecord('beta', now, { secrets: { [old]: 0 } }), now), true, 'a forgotten secret\'s hash is free')
    t.same((await keys.find(old, now + 2000))?.name, 'beta')

    const now2 = await keys.rotate('alpha', secretHash(), now + 3000, now + 3000)
    t.equal(Object.keys(now2?.secrets ?? {}).length, 1, 'a grace ending at once forgets every other secret')
    t.equal(await keys.find(fresh, now + 3000), null)
    t.equal(await keys.create(keyRecord('gamma', now, { secrets: { [fresh]: 0 } }), now), true, 'and frees their hashes')
  })

  t.test('keys: rotate refuses an unknown key and a taken hash', async t => {
    const { keys } = await open(t)
    const [a, b] = [keyRecord('alpha', now), keyRecord('beta', now)]
    await keys.create(a, now)
    await keys.create(b, now)
    t.equal(await keys.rotate('nobody', secretHash(), now, now), null)
    t.equal(await keys.rotate('alpha', hashOf(b), now + 1000, now), null, 'another key\'s hash')
    t.equal(await keys.rotate('alpha', hashOf(a), now + 1000, now), null, 'its own hash')
    t.same(await keys.get('alpha'), a, 'nothing changed')
    t.same(await keys.find(hashOf(b), now), b)
  })

  t.test('keys: concurrent rotations of one key all land', async t => {
    const { keys } = await open(t)
    await keys.create(keyRecord('alpha', now), now)
    const hashes = Array.from({ length: 8 }, secretHash)
    const results = await Promise.all(hashes.map(h => keys.rotate('alpha', h, now + HOUR, now)))
    t.ok(results.every(r => r !== null))
    const key = await keys.get('alpha')
    t.equal(Object.keys(key!.secrets).length, 9, 'every secret kept')
    for (const h of hashes) t.equal((await keys.find(h, now))?.name, 'alpha')
  })

  t.test('keys: revoke refuses the key at once and frees its hashes; its ledger stays', async t => {
    const { keys } = await open(t)
    const key = keyRecord('alpha', now)
    await keys.create(key, now)
    const fresh = secretHash()
    await keys.rotate('alpha', fresh, now + HOUR, now)
    await keys.account('alpha', { add: { item: 'f:ABC', bytes: 100, until: now + HOUR } }, now)
    t.equal(await keys.revoke('alpha'), true)
    t.equal(await keys.find(hashOf(key), now), null, 'the old secret')
    t.equal(await keys.find(fresh, now), null, 'the new secret')
    t.equal(await keys.get('alpha'), null)
    t.same(await keys.list(), [])
    t.equal(await keys.revoke('alpha'), false, 'gone already')
    t.same(await keys.usage('alpha', now), { bytes: 100, lastUsedAt: 0 }, 'ledger untouched')
    t.equal(await keys.create(keyRecord('alpha', now, { secrets: { [fresh]: 0 } }), now), true, 'name and hash free again')
    t.equal((await keys.find(fresh, now))?.name, 'alpha')
  })

  t.test('ledger: adds, usage, lastUsedAt only with a quota', async t => {
    const { keys } = await open(t)
    t.same(await keys.usage('alpha', now), { bytes: 0, lastUsedAt: 0 }, 'nothing yet')
    t.same(await keys.account('alpha', { add: { item: 'f:A', bytes: 100, until: now + HOUR } }, now), { ok: true, added: 100, used: 100 })
    t.same(await keys.usage('alpha', now), { bytes: 100, lastUsedAt: 0 }, 'no quota: not a use')
    t.same(await keys.account('alpha', { add: { item: 'u:1', bytes: 50, until: now + HOUR }, quota: 1000 }, now + 5), { ok: true, added: 50, used: 150 })
    t.same(await keys.usage('alpha', now + 6), { bytes: 150, lastUsedAt: now + 5 })
    t.same(await keys.account('alpha', { add: { item: 'u:1', bytes: 25, until: now + 2 * HOUR } }, now + 7), { ok: true, added: 25, used: 175 }, 'adding to an item')
    t.same(await keys.usage('alpha', now + HOUR), { bytes: 75, lastUsedAt: now + 5 }, 'the item took the new end')
    t.same(await keys.usage('beta', now), { bytes: 0, lastUsedAt: 0 }, 'names are independent')
    t.same(await keys.account('alpha', {}, now + 8), { ok: true, added: 0, used: 175 }, 'an empty change')
  })

  t.test('ledger: an item holds nothing from its end on', async t => {
    const { keys } = await open(t)
    await keys.account('alpha', { add: { item: 's:1', bytes: 300, until: now + 1000 } }, now)
    await keys.account('alpha', { add: { item: 'f:A', bytes: 200, until: now + 5000 } }, now)
    t.equal((await keys.usage('alpha', now + 999)).bytes, 500)
    t.equal((await keys.usage('alpha', now + 1000)).bytes, 200, 'usage does not count an ended item')
    t.same(await keys.account('alpha', { add: { item: 'u:2', bytes: 400, until: now + 9000 }, quota: 600 }, now + 1000), { ok: true, added: 400, used: 600 }, 'nor does the quota')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 10, until: now + 9000 } }, now + 1001), { ok: true, added: 10, used: 610 }, 'an ended item starts again from nothing')
    t.equal((await keys.usage('alpha', now + 9000)).bytes, 0, 'all ended')
    t.same(await keys.account('alpha', { add: { item: 'f:B', bytes: 1, until: now + 10_000 } }, now + 9000), { ok: true, added: 1, used: 1 })
    t.same(await keys.account('alpha', { add: { item: 'f:C', bytes: 5, until: now + 9000 } }, now + 9000), { ok: true, added: 0, used: 1 }, 'an item ended before it is added holds nothing')
  })

  t.test('ledger: drop then add moves bytes between items (an upload becomes a file)', async t => {
    const { keys } = await open(t)
    await keys.account('alpha', { add: { item: 'u:1', bytes: 700, until: now + 60_000 }, quota: 1000 }, now)
    await keys.account('alpha', { add: { item: 'f:X', bytes: 200, until: now + HOUR } }, now)
    t.same(await keys.account('alpha', { drop: ['u:1'], add: { item: 'f:ABC', bytes: 700, until: now + HOUR }, quota: 1000 }, now + 1), { ok: true, added: 700, used: 900 },
      'the dropped bytes make room for the add')
    t.equal((await keys.usage('alpha', now + 60_000)).bytes, 900, 'the dropped item is gone (its end no longer matters)')
    t.same(await keys.account('alpha', { drop: ['f:X', 'f:X', 'nothing'] }, now + 2), { ok: true, added: 0, used: 700 }, 'drop alone; unknown and repeated items drop nothing more')
    t.same(await keys.account('alpha', { drop: ['f:ABC'], add: { item: 'f:ABC', bytes: 10, until: now + HOUR } }, now + 3), { ok: true, added: 10, used: 10 }, 'a dropped item added again starts from nothing')
  })

  t.test('ledger: a quota refuses what does not fit and changes nothing (but ended items still go)', async t => {
    const { keys } = await open(t)
    await keys.account('alpha', { add: { item: 'f:A', bytes: 600, until: now + HOUR } }, now)
    await keys.account('alpha', { add: { item: 's:1', bytes: 100, until: now + 1000 } }, now)
    t.same(await keys.account('alpha', { add: { item: 'u:1', bytes: 301, until: now + HOUR }, quota: 1000 }, now + 10), { ok: false, added: 0, used: 700 })
    t.same(await keys.account('alpha', { drop: ['f:A'], add: { item: 'u:1', bytes: 2000, until: now + HOUR }, quota: 1000 }, now + 10), { ok: false, added: 0, used: 700 },
      'the drop of a refused change is not applied')
    t.same(await keys.usage('alpha', now + 10), { bytes: 700, lastUsedAt: 0 }, 'a refusal is not a use')
    t.same(await keys.account('alpha', { add: { item: 'u:1', bytes: 300, until: now + HOUR }, quota: 1000 }, now + 20), { ok: true, added: 300, used: 1000 }, 'exactly to the quota')
    t.same(await keys.account('alpha', { add: { item: 'u:2', bytes: 1, until: now + HOUR }, quota: 1000 }, now + 1000), { ok: true, added: 1, used: 901 }, 'the ended item made room')
    t.same(await keys.account('alpha', { add: { item: 'u:3', bytes: 5000, until: now + HOUR } }, now + 1000), { ok: true, added: 5000, used: 5901 }, 'without a quota anything fits')
    t.same(await keys.account('alpha', { add: { item: 'u:3', bytes: -10, until: now + HOUR }, quota: 1000 }, now + 1000), { ok: true, added: -10, used: 5891 }, 'over the quota, giving back is never refused')
  })

  t.test('ledger: upTo takes what fits, refusing only when nothing does', async t => {
    const { keys } = await open(t)
    await keys.account('alpha', { add: { item: 'f:A', bytes: 800, until: now + HOUR } }, now)
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 500, until: now + HOUR }, quota: 1000, upTo: true }, now + 1), { ok: true, added: 200, used: 1000 })
    t.same(await keys.usage('alpha', now + 2), { bytes: 1000, lastUsedAt: now + 1 })
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 1, until: now + HOUR }, quota: 1000, upTo: true }, now + 3), { ok: false, added: 0, used: 1000 }, 'full')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 50, until: now + HOUR }, quota: 900, upTo: true }, now + 4), { ok: false, added: 0, used: 1000 }, 'over a lowered quota')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 100, until: now + HOUR }, quota: 2000, upTo: true }, now + 5), { ok: true, added: 100, used: 1100 }, 'all of it when it fits')
  })

  t.test('ledger: negative adds give bytes back; an item at nothing goes', async t => {
    const { keys } = await open(t)
    await keys.account('alpha', { add: { item: 's:1', bytes: 1000, until: now + HOUR } }, now)
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: -400, until: now + HOUR } }, now), { ok: true, added: -400, used: 600 }, 'a replaced chunk')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: -600, until: now + HOUR } }, now), { ok: true, added: -600, used: 0 }, 'down to nothing')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: 5, until: now + HOUR } }, now), { ok: true, added: 5, used: 5 }, 'the item was gone: it starts again')
    t.same(await keys.account('alpha', { add: { item: 's:1', bytes: -50, until: now + HOUR } }, now), { ok: true, added: -5, used: 0 }, 'an item never goes below nothing')
    t.same(await keys.account('alpha', { add: { item: 's:2', bytes: -50, until: now + HOUR } }, now), { ok: true, added: 0, used: 0 }, 'a negative add creates nothing')
    t.same(await keys.usage('alpha', now), { bytes: 0, lastUsedAt: 0 })
  })

  t.test('ledger: concurrent reservations never exceed the quota', async t => {
    const { keys } = await open(t)
    const [quota, size] = [1000, 70]
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) =>
      keys.account('alpha', { add: { item: `u:${i}`, bytes: size, until: now + HOUR }, quota }, now)))
    t.equal(results.filter(r => r.ok).length, Math.floor(quota / size))
    t.ok(results.every(r => r.used <= quota), 'used never above the quota')
    t.equal(Math.max(...results.map(r => r.used)), Math.floor(quota / size) * size)
    t.equal((await keys.usage('alpha', now)).bytes, Math.floor(quota / size) * size)
  })

  t.test('ledger: works for a name the store has no record of, and leaves records alone', async t => {
    const { keys } = await open(t)
    t.same(await keys.account('from-env', { add: { item: 'f:A', bytes: 10, until: now + HOUR }, quota: 100 }, now), { ok: true, added: 10, used: 10 })
    t.same(await keys.usage('from-env', now), { bytes: 10, lastUsedAt: now })
    t.equal(await keys.get('from-env'), null)
    t.same(await keys.list(), [])
  })
}
