/** Issue 20's starvation scenario (overload-fairness.ts) on the embedded default: fs + local state. */
import t from 'tap'
import { starvationScenario } from './overload.js'

t.test('fs+local: stalled uploads, stopped readers and header tricklers starve no one for a minute', { timeout: 300_000 }, async t => {
  await starvationScenario(t, 'fs+local', {})
})
