/**
 * The fair-share rule of transfer slots: a subject takes a slot only while it holds fewer than
 * are left free.
 */
import t from 'tap'
import { FairSlots } from '../../src/core/fair-slots.js'

/** Takes slots for `subject` until refused; returns the releases and the refusal. */
function fill (slots: FairSlots, subject: string) {
  const got: Array<() => void> = []
  while (true) {
    const r = slots.take(subject)
    if (typeof r !== 'function') return { got, refusal: r }
    got.push(r)
  }
}

t.test('one subject alone holds half the slots; the others then still find one', async t => {
  const slots = new FairSlots(100)
  const a = fill(slots, 'a')
  t.equal(a.got.length, 50)
  t.equal(a.refusal, 'share')
  t.type(slots.take('b'), 'function', 'a newcomer is let in')
  t.same(slots.stats(), { limit: 100, used: 51, subjects: 2, largest: 50 })
})

t.test('two subjects taking in turn end near a third each, a third left for the rest', async t => {
  const slots = new FairSlots(300)
  let a = 0; let b = 0
  for (let i = 0; i < 1000; i++) {
    if (typeof slots.take('a') === 'function') a++
    if (typeof slots.take('b') === 'function') b++
  }
  t.ok(a <= 100 && b <= 100, `a ${a}, b ${b}`)
  t.ok(slots.stats().used <= 200)
  t.type(slots.take('c'), 'function')
})

t.test('many subjects fill the instance; then everyone is refused as full', async t => {
  const slots = new FairSlots(10)
  for (let i = 0; i < 10; i++) t.type(slots.take(`s${i}`), 'function')
  t.equal(slots.take('new'), 'full')
  t.equal(slots.take('s0'), 'full')
})

t.test('a release frees the slot once, and a subject with none left is forgotten', async t => {
  const slots = new FairSlots(4)
  const r = slots.take('a')
  if (typeof r !== 'function') throw new Error('refused')
  r(); r()
  t.same(slots.stats(), { limit: 4, used: 0, subjects: 0, largest: 0 })
})

t.test('limit 0: no limit, nothing counted', async t => {
  const slots = new FairSlots(0)
  let taken = 0
  for (let i = 0; i < 10_000; i++) if (typeof slots.take('a') === 'function') taken++
  t.equal(taken, 10_000)
  t.equal(slots.stats().used, 0)
})
