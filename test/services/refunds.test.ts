/**
 * The refund queue's own rules (retry until acknowledged, oldest first, bounded, a last try on
 * close). The state store here is a stub that fails on demand: the real faults (a paused Redis)
 * are in test/e2e/crash/claim-refund.test.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { pino } from 'pino'
import t from 'tap'
import { createMetrics } from '../../src/metrics.js'
import { createRefundQueue } from '../../src/services/refunds.js'
import { until } from '../helpers/until.js'

function setup (opts: { maxPending?: number } = {}) {
  const done: string[] = []
  const store = {
    failing: true,
    async refund (code: string, claimId: string) {
      if (store.failing) throw new Error('state store unavailable')
      done.push(`${code}/${claimId}`)
    }
  }
  const metrics = createMetrics({ dueObjects: async () => 0 })
  const queue = createRefundQueue({ files: store, log: pino({ level: 'silent' }), metrics, now: Date.now, baseDelayMs: 5, maxDelayMs: 20, ...opts })
  const metric = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values
  return { queue, store, done, metric }
}

t.test('retries until the store answers, oldest first', async t => {
  const { queue, store, done, metric } = setup()
  queue.add('AAAAAA', 'c1')
  queue.add('BBBBBB', 'c2')
  await sleep(100)
  t.equal(queue.pending, 2)
  t.same(done, [])
  store.failing = false
  await until(() => queue.pending === 0, 10_000, 'the refunds')
  t.same(done, ['AAAAAA/c1', 'BBBBBB/c2'])
  t.same((await metric('dropcode_claim_refunds_total')).map(v => [v.labels.event, v.value]).sort(), [['queued', 2], ['refunded', 2]])
  t.same((await metric('dropcode_claim_refunds_pending'))[0]!.value, 0)
  queue.add('CCCCCC', 'c3') // a worker starts again after the queue emptied
  await until(() => queue.pending === 0, 10_000, 'the third refund')
  t.same(done.at(-1), 'CCCCCC/c3')
})

t.test('bounded: beyond maxPending a refund is given up', async t => {
  const { queue, metric } = setup({ maxPending: 2 })
  for (const id of ['c1', 'c2', 'c3']) queue.add('AAAAAA', id)
  t.equal(queue.pending, 2)
  t.same((await metric('dropcode_claim_refunds_total')).find(v => v.labels.event === 'dropped')?.value, 1)
  t.equal(await queue.close(10), 2)
})

t.test('close tries once more, and gives up what is left after its timeout', async t => {
  const first = setup()
  first.queue.add('AAAAAA', 'c1')
  await sleep(30)
  first.store.failing = false
  t.equal(await first.queue.close(1000), 0, 'acknowledged during close')
  t.same(first.done, ['AAAAAA/c1'])

  const second = setup()
  second.queue.add('AAAAAA', 'c1')
  t.equal(await second.queue.close(50), 1, 'still failing: given up')
  second.queue.add('BBBBBB', 'c2')
  t.equal(second.queue.pending, 0, 'a closed queue takes nothing')
})
