import t from 'tap'
import { CODE_ALPHABET, isBlobKey, isCode, newBlobKey, newClaimId, newCode } from '../../src/core/ids.js'

t.test('codes: 6 symbols from the 62-symbol alphabet', async t => {
  t.equal(CODE_ALPHABET.length, 62)
  t.equal(new Set(CODE_ALPHABET).size, 62)
  for (let i = 0; i < 1000; i++) t.match(newCode(), /^[A-Za-z0-9]{6}$/)
})

t.test('codes are uniform over the alphabet (no modulo bias)', async t => {
  const counts = new Map<string, number>()
  const draws = 62 * 2000 / 6
  for (let i = 0; i < draws; i++) for (const ch of newCode()) counts.set(ch, (counts.get(ch) ?? 0) + 1)
  t.equal(counts.size, 62, 'every symbol appears')
  // Chi-square with 61 degrees of freedom: p < 1e-6 above ~130. A modulo bias (256 % 62 = 8
  // symbols drawn 5/4 as often) would give several hundred at this sample size.
  const expected = (draws * 6) / 62
  let chi = 0
  for (const n of counts.values()) chi += (n - expected) ** 2 / expected
  t.ok(chi < 130, `chi-square ${chi.toFixed(1)}`)
})

t.test('isCode accepts exactly the format', async t => {
  for (const ok of ['abcDEF', '000000', 'Zz9Zz9']) t.ok(isCode(ok), ok)
  for (const bad of ['abcDE', 'abcDEFG', 'abc-EF', 'abc/EF', '../../', 'abcDE\u0000', 'ＡBCDEF', '', 42, null]) t.notOk(isCode(bad), JSON.stringify(bad))
})

t.test('object keys: 128 random bits as hex', async t => {
  const k = newBlobKey()
  t.ok(isBlobKey(k))
  t.not(newBlobKey(), k)
  t.notOk(isBlobKey('../' + k.slice(3)))
})

t.test('claim ids: 128 random bits as base64url, never repeated across refills of their pool', async t => {
  // 4 KiB pools of 16-byte ids: 256 per pool, so this crosses several refills.
  const ids = Array.from({ length: 2000 }, newClaimId)
  t.same(ids.filter(id => !/^[A-Za-z0-9_-]{22}$/.test(id)), [], 'the format of a claim ETag')
  t.equal(new Set(ids).size, ids.length, 'all distinct')
})
