/**
 * Issue 22: the starvation scenario (test/e2e/fairness/overload.ts) through each real
 * balancer, run from the repository's recipe, in front of two instances on S3 (radosgw) and
 * Redis. Found by an operator before the fairness fix: through HAProxy and a streaming nginx, 16
 * stalled authenticated uploads froze every upload of an instance (each took 2 of its 32 part
 * buffers before its first byte; new uploads waited with no 503 while /readyz stayed 200).
 *
 * Through a proxy the same clients meet these bounds:
 * - Stalled uploads and chunks reach an instance (both recipes stream request bodies), which
 *   cuts them by the minimum rate; the proxy answers its client 502 and closes at once, so the
 *   service's bound holds for the client (the proxies' own 180 s never come into play).
 * - Stopped readers are cut by their instance too (a reset: see src/plugins/stall-guard.ts); a
 *   client that reads nothing cannot notice, so, as without a proxy, the instances' logs tell
 *   when, and each reader, reading again, finds its connection closed short of the file.
 * - Header tricklers never reach an instance: a proxy waits for whole headers and cuts them by
 *   its own bound (HAProxy's `timeout http-request`, 30 s; nginx's `client_header_timeout`,
 *   which the recipe leaves at 60 s). They stay in: 300 of them must not starve the proxy.
 * Normal traffic is measured for 25 s instead of a minute (CI time), and at least until the
 * instances have cut the first stalled uploads. The two balancers run one after the other: at
 * once, the two scenarios' stopped readers share the kernel's socket memory and slow each other.
 *
 * Found here: nginx took each cut upload for a failure of its instance (max_fails=1) and, once
 * both were marked, answered everyone 502 "no live upstreams"; HAProxy's checks took both
 * instances out while S3 answered /readyz slowly under the burst (503 "No server is available");
 * and HAProxy kept readers' connections open indefinitely after their instance closed them with
 * data still queued. The recipes' comments and stall-guard.ts say what changed.
 */
import t from 'tap'
import { loadConfig } from '../../../src/config.js'
import type { BalancerKind } from '../../helpers/balancers.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { SCENARIO_ENV, slowClientScenario, type ScenarioOptions } from '../fairness/overload.js'
import { behindBalancer } from './recipes.js'

/** More than twice what the way to one reader buffers (see ScenarioOptions.readerFileBytes). */
const READER_FILE = 100_000_000
/**
 * Stopped readers (ScenarioOptions.readers): the two instances' 256 download slots are not what
 * they test here, but that each is cut through the proxy. With the direct scenarios' 140, the
 * proxies' buffers (up to 64 MiB a reader, copied twice on two cores) took most of each
 * balancer's three minutes to fill.
 */
const READERS = 40
/**
 * The second set of buffers a proxy puts before each reader must fill before a reader owes
 * anything (ScenarioOptions.readerBoundMs), and how long that takes depends on the machine:
 * with 140 readers, passing CI runs cut the last reader behind nginx 173–188 s after the burst,
 * and a run beside heavier tests 191.5 s (HAProxy: two readers still uncut at 190 s); with 40,
 * each balancer's whole scenario took 66 s on an idle machine. Two minutes beyond the stalled
 * uploads' bound, then; a reader that is never cut still fails.
 */
const READER_BOUND_MS = 240_000
/**
 * Between the burst and the measure (ScenarioOptions.settleMs): through a proxy the readers'
 * buffers fill twice over. 12 s was short in CI runs on Node 24 behind HAProxy.
 */
const SETTLE_MS = 20_000
const FRONT: Record<BalancerKind, ScenarioOptions> = {
  nginx: { observeMs: 25_000, headersBoundMs: 60_000, readerFileBytes: READER_FILE, readers: READERS, readerBoundMs: READER_BOUND_MS, settleMs: SETTLE_MS, deadlineMs: 3000 },
  haproxy: { observeMs: 25_000, headersBoundMs: 30_000, readerFileBytes: READER_FILE, readers: READERS, readerBoundMs: READER_BOUND_MS, settleMs: SETTLE_MS, deadlineMs: 3000 }
}

// Two scenarios of about a minute each here (up to four with the readers' bound), one after the other.
t.setTimeout(840_000)
const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

for (const kind of ['nginx', 'haproxy'] as const) {
  t.test(`${kind}: stalled uploads, stopped readers and header tricklers starve no one behind the recipe`, { timeout: 400_000 }, async t => {
    const { instances, lb, env } = await behindBalancer(t, kind, { redis, s3 }, SCENARIO_ENV)
    await slowClientScenario(t, { url: lb.url, instances, config: loadConfig(env) }, FRONT[kind])
  })
}
