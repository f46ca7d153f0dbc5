import t from 'tap'
import { BASE_BACKOFF_MS, isTransient, LEASE_JITTER_MS, MAX_BACKOFF_MS, MAX_RETRY_AFTER_MS, NO_ANSWER, parseRetryAfter, retryWait } from '../../src/api/retry.js'

const svc = (status: number, retryAfterMs: number | undefined) => ({ status, retryAfterMs, fromService: true })

t.test('transient: no answer, 408, 409, 429, 500, 502-504; final: other 4xx, 501, 505, 507', async t => {
  for (const status of [NO_ANSWER, 408, 409, 429, 500, 502, 503, 504]) t.ok(isTransient(status), `${status} is retried`)
  for (const status of [200, 400, 401, 403, 404, 413, 416, 431, 501, 505, 507]) t.notOk(isTransient(status), `${status} is final`)
})

t.test('backoff: 0.5 s doubling to 15 s, plus up to 50 % jitter, never under Retry-After', async t => {
  t.same(retryWait(svc(503, undefined), 0, 0), { ms: BASE_BACKOFF_MS, spends: true })
  t.same(retryWait(svc(503, undefined), 1, 0), { ms: 2 * BASE_BACKOFF_MS, spends: true })
  t.same(retryWait(svc(NO_ANSWER, undefined), 3, 0.999).ms, 8 * BASE_BACKOFF_MS * 1.4995)
  t.same(retryWait(svc(503, undefined), 40, 0), { ms: MAX_BACKOFF_MS, spends: true }, 'capped')
  t.equal(retryWait(svc(503, undefined), 40, 0.5).ms, MAX_BACKOFF_MS * 1.25)
  t.same(retryWait(svc(429, 7000), 0, 0), { ms: 7000, spends: true }, 'Retry-After longer than the backoff wins')
  t.same(retryWait(svc(429, 100), 2, 0), { ms: 4 * BASE_BACKOFF_MS, spends: true }, 'a shorter Retry-After does not shorten the backoff')
})

t.test('a 409 with Retry-After waits out the lock without spending an attempt; without it, backs off', async t => {
  t.same(retryWait(svc(409, 3000), 5, 0), { ms: 3000, spends: false })
  t.equal(retryWait(svc(409, 3000), 5, 0.5).ms, 3000 + LEASE_JITTER_MS / 2)
  t.same(retryWait(svc(409, undefined), 0, 0), { ms: BASE_BACKOFF_MS, spends: true })
})

t.test('a 409 with Retry-After that is not the service\'s (a proxy, a wrong URL) backs off and spends an attempt', async t => {
  t.same(retryWait({ status: 409, retryAfterMs: 3000, fromService: false }, 0, 0), { ms: 3000, spends: true })
  t.same(retryWait({ status: 409, retryAfterMs: 100, fromService: false }, 3, 0), { ms: 8 * BASE_BACKOFF_MS, spends: true })
})

t.test('Retry-After: delta-seconds or an HTTP date, between 0 and 60 s, else undefined', async t => {
  const now = Date.parse('2026-11-27T12:00:00Z')
  t.equal(parseRetryAfter('3', now), 3000)
  t.equal(parseRetryAfter(' 0 ', now), 0)
  t.equal(parseRetryAfter('3600', now), MAX_RETRY_AFTER_MS, 'capped')
  t.equal(parseRetryAfter('Fri, 27 Nov 2026 12:00:10 GMT', now), 10_000)
  t.equal(parseRetryAfter('Fri, 27 Nov 2026 11:59:00 GMT', now), 0, 'a date in the past: now')
  for (const bad of [undefined, null, '', 'soon', '-5', '1.5']) t.equal(parseRetryAfter(bad, now), undefined, `${String(bad)} is unreadable`)
})
