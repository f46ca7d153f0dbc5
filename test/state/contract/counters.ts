/** CounterStore contract: fixed windows, peek without counting. Every driver runs it. */
import type { Test } from 'tap'
import type { OpenBackend } from './files.js'

export function counterStoreContract (t: Test, open: OpenBackend) {
  const now = Date.now()

  t.test('counters: fixed windows; read does not count', async t => {
    const { counters } = await open(t)
    t.same(await counters.read('a', now), { count: 0, resetMs: 0 })
    t.same(await counters.incr('a', 300, now), { count: 1, resetMs: 300 })
    t.same(await counters.incr('a', 300, now + 100), { count: 2, resetMs: 200 })
    t.same(await counters.read('a', now + 100), { count: 2, resetMs: 200 })
    t.same(await counters.read('a', now + 100), { count: 2, resetMs: 200 }, 'read adds nothing')
    t.equal((await counters.incr('b', 300, now)).count, 1, 'keys are independent')
    t.same(await counters.read('a', now + 300), { count: 0, resetMs: 0 }, 'window over')
    t.same(await counters.incr('a', 300, now + 300), { count: 1, resetMs: 300 }, 'a new window')
  })

  t.test('counters: concurrent hits are all counted', async t => {
    const { counters } = await open(t)
    const results = await Promise.all(Array.from({ length: 100 }, () => counters.incr('c', 60_000, now)))
    t.same(results.map(r => r.count).sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i + 1))
  })
}
