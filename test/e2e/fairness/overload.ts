/**
 * Issue 20's starvation scenario, with the default limits, against real server processes:
 * 50 uploads of the key the normal traffic uses and 50 of a second key send their headers and
 * 64 KiB of body and stall, and so do 32 chunks of that first key; 300 connections trickle
 * request headers (reopened as they are cut, so 300 stay open); 140 connections open a download
 * of one 50 MB file and stop reading. For a whole minute, every normal 100 KiB upload and 1 MiB
 * download must answer 200 within 2 s. Afterwards every stalled connection has been closed
 * within its documented bound, and nothing the stalled uploads sent is stored.
 *
 * Measured before the fix: 0 normal uploads succeeded (503 DROPCODE_BUSY, all 32 upload slots
 * held; on S3 the uploads froze on the part buffers), and downloads answered 503 once 128 readers
 * held every download slot.
 *
 * `slowClientScenario` runs it against any front: the server itself (`starvationScenario`), or
 * a load balancer in front of instances (test/e2e/balancers/fairness.test.ts), with the bounds of what
 * stands between the clients and the instances.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { loadConfig, type Config } from '../../../src/config.js'
import { STALL_MS } from '../../../src/plugins/stall-guard.js'
import { API_KEY, eventually, testEnv, upload, type Backends, type DriverPair } from '../../helpers/app.js'
import { startSession } from '../../helpers/chunks.js'
import { startServer, type ServerProcess } from '../../helpers/server-process.js'
import { headerTricklers, normalTraffic, stalledUpload, stoppedReader } from '../../helpers/slow-clients.js'
import { listStored } from '../../helpers/storage.js'

const MiB = 1024 * 1024
const SECOND_KEY = 'second-key-0123456789'
const MINUTE_MS = 60_000
const DEADLINE_MS = 2000
/** What the instances need beyond a test's driver pair: both keys, files that last. */
export const SCENARIO_ENV = { API_KEYS: `${API_KEY},${SECOND_KEY}`, MAX_DOWNLOADS: '100000', LOG_LEVEL: 'warn' }
/**
 * The documented bounds (README: minimum transfer rate, request headers), plus slack: on a
 * loaded 2-core machine the server takes seconds to begin 600 requests arriving at once, and the
 * rate's windows count from each request's beginning.
 */
const WINDOW_MS = 30_000
const SLACK_MS = 8000
const STALLED_BOUND_MS = 2 * WINDOW_MS + 2000 + SLACK_MS
/** The service's own header bound: 30 s, checked every second. */
const SERVICE_HEADERS_MS = 30_000 + 1000
/**
 * A stopped reader's windows start over while the server has nothing queued for it (the file
 * still coming from storage: 140 readers of 50 MB at once from S3 on a loaded machine take
 * tens of seconds to back up), so its bound counts from a moment the test cannot see; it gets
 * a looser one. Two windows more were not enough on S3 in a CI run beside other tests: 21
 * readers were cut 132.9–134.9 s after the burst (bound 130 s), all at once, when storage had
 * caught up.
 */
const READER_BOUND_MS = STALLED_BOUND_MS + 3 * WINDOW_MS

/** Where the clients connect, and what serves them. */
export interface ScenarioTarget {
  /** The front every client talks to: an instance itself, or a balancer in front of them. */
  url: string
  /** The instances behind `url`: their logs say when each connection was cut. */
  instances: ServerProcess[]
  /** Their configuration (one storage, which must hold nothing of the stalled uploads after). */
  config: Config
}

export interface ScenarioOptions {
  /** ms of normal traffic measured (default: a minute). */
  observeMs?: number
  /** ms in which the front cuts a connection that never ends its headers (default: the service's 31 s). */
  headersBoundMs?: number
  /**
   * Bytes of the file the stopped readers open (default 50 MB). It must be larger than the way
   * to one reader can buffer, or a reader holds the whole file and is never cut: socket buffers
   * grow to the kernel's tcp_rmem maximum on each receiving side (32 MiB here), so a proxy
   * doubles what a direct reader takes.
   */
  readerFileBytes?: number
  /**
   * Stopped readers (default 140: more than an instance's 128 download slots). Behind a balancer
   * the two instances' slots take 256, so the slot limit is not what they test there, but that
   * the proxy lets each one be cut; fewer fill the proxy's buffers sooner.
   */
  readers?: number
  /**
   * ms after the burst within which the stopped readers are cut by the minimum rate (default
   * READER_BOUND_MS). A reader's windows start over while its instance has nothing queued for
   * it, and through a proxy its instance's answer fills two sets of buffers before anything
   * stays queued: on a loaded machine, readers behind HAProxy were cut 131–134 s after the
   * burst.
   */
  readerBoundMs?: number
  /**
   * ms between the burst and the measured traffic (default 5 s): the stopped readers' sockets
   * fill first. Through a proxy they fill two sets of buffers (140 × up to 64 MiB copied twice
   * on the same two cores): behind HAProxy on a loaded machine the first downloads 5 s after the
   * burst took 2.0–2.5 s, the later ones under 1.3 s.
   */
  settleMs?: number
  /**
   * ms within which each normal request must answer 200 (default 2 s, issue 20's bound for the
   * service itself). Through a proxy on the same two cores, the first requests of the measure
   * took 2.0–2.5 s in CI runs (later ones under 1.3 s), so the balancer runs allow 3 s.
   */
  deadlineMs?: number
}

/** The scenario against one server process on `pair`. */
export async function starvationScenario (t: Test, pair: DriverPair, backends: Backends): Promise<void> {
  const env = testEnv(t, pair, backends, SCENARIO_ENV)
  const server = await startServer(t, env)
  await slowClientScenario(t, { url: server.url, instances: [server], config: loadConfig(env) })
}

export async function slowClientScenario (t: Test, target: ScenarioTarget, options: ScenarioOptions = {}): Promise<void> {
  const { url, instances, config } = target
  const { observeMs = MINUTE_MS, headersBoundMs = SERVICE_HEADERS_MS, readerFileBytes = 50_000_000, readers: readerCount = 140, readerBoundMs = READER_BOUND_MS, settleMs = 5000, deadlineMs = DEADLINE_MS } = options
  const big = await upload(url, [['file', { data: Buffer.alloc(readerFileBytes, 2), filename: 'big.bin' }], ['max_downloads', '1000']])
  const small = await upload(url, [['file', { data: Buffer.alloc(MiB, 3), filename: 'small.bin' }], ['max_downloads', '100000']])
  t.equal(big.status, 200)
  t.equal(small.status, 200)

  // 32 chunked sessions of the normal traffic's key, each with a chunk that stalls.
  const sessions = await Promise.all(Array.from({ length: 32 }, async () => await startSession(url, [['filename', 'stalled.bin'], ['total_chunks', '2']])))
  // What storage holds before (the two files; on S3 the sessions' multipart uploads) plus each
  // upload answered 200 is what it must hold after.
  let stored = (await listStored(config)).length
  const stalled = [
    ...Array.from({ length: 50 }, () => stalledUpload(url, API_KEY)),
    ...Array.from({ length: 50 }, () => stalledUpload(url, SECOND_KEY)),
    ...sessions.map(id => stalledUpload(url, API_KEY, '/upload/chunk', [['upload_id', id], ['chunk_index', '0']]))
  ]
  const readers = Array.from({ length: readerCount }, () => stoppedReader(url, big.body.code))
  const tricklers = headerTricklers(url, 300)
  t.teardown(() => {
    tricklers.stop()
    for (const h of [...stalled, ...readers, ...tricklers.all]) h.socket.destroy()
  })
  // All of them are in, and the stopped readers' first seconds (their socket buffers filling,
  // from S3 too) are over: then the minute is measured.
  await sleep(settleMs)
  const openedBy = Math.max(...[...stalled, ...readers].map(h => h.lastByteAt))
  // One upload and one download first, not timed: the first request after the burst opens new
  // connections (client to server, server to S3) on a machine still busy with the burst.
  t.equal((await upload(url, [['file', { data: 'warm-up' }]])).status, 200)
  stored++
  t.equal((await fetch(`${url}/download/${small.body.code}`).then(async r => { await r.arrayBuffer(); return r })).status, 200)

  // However short, the measure lasts until the instances have cut the first stalled uploads (one
  // window after they began): a proxy in front may take that for a failure of the instance.
  const measuredMs = Math.max(observeMs, openedBy + WINDOW_MS + 5000 - Date.now())
  const traffic = await normalTraffic(url, small.body.code, measuredMs, deadlineMs)
  stored += traffic.stored
  const { uploads, downloads } = traffic
  t.same(traffic.failures, [], `${uploads} uploads and ${downloads} downloads in ${Math.round(measuredMs / 1000)} s beside 132 stalled uploads and chunks, ${readerCount} stopped readers and 300 header tricklers: each 200 within ${deadlineMs} ms (slowest ${traffic.slowestMs} ms)`)
  const enough = observeMs / 600 // 100 a minute each way
  t.ok(uploads > enough && downloads > enough, `enough traffic: ${uploads} uploads, ${downloads} downloads`)

  tricklers.stop()
  // Every stalled connection is cut by an instance within its bound (none by us), and its
  // client's connection closed. A reader that reads nothing does not notice the close, so the
  // instances' logs tell when each was cut, and the readers, reading again, find their
  // connection ended short of the file.
  // By either rule: a stopped reader whose instance was the one behind (nothing of its answer
  // queued while storage delivered) restarts its rate windows, and may be cut by the no-byte
  // rule instead (through nginx: 4 of 140 readers, 2 minutes after their last byte).
  const cuts = () => instances.flatMap(s => s.logs).filter(l => l.msg === 'connection cut: under the minimum transfer rate' || l.msg === 'connection cut: no byte moved')
  // Anything else the instances warned of, for a failure to say.
  const warnings = () => [...new Set(instances.flatMap(s => s.logs).filter(l => (l.level as number) >= 40 && !String(l.msg).startsWith('connection cut')).map(l => String(l.msg)))]
  // How the instances' requests ended, by route, status and end (for a failure to say).
  const endings = () => {
    const out: Record<string, number> = {}
    for (const l of instances.flatMap(s => s.logs)) if (l.msg === 'request') { const k = `${String(l.route)} ${String(l.status)} ${String(l.end)}`; out[k] = (out[k] ?? 0) + 1 }
    return out
  }
  // Every stalled upload and stopped reader ends by the instance's hand: cut by one of the two
  // rules, or (a reader) its answer failing on the instance's side first, such as its stream
  // from storage (seen once in 272 through HAProxy: a download ended by the instance with no
  // cut logged; the cause was not found).
  const serverEnded = () => instances.flatMap(s => s.logs).filter(l => l.msg === 'request' && l.end === 'server' && ['/upload', '/upload/chunk', '/download/:code'].includes(String(l.route)))
  await eventually(async () => {
    const open = stalled.filter(h => h.closedAt === undefined).length
    if (open > 0 || serverEnded().length < stalled.length + readers.length) throw new Error(`${open} stalled uploads still open; ${serverEnded().length} ended by an instance (${cuts().length} cut by a rule); other warnings: ${warnings().join(' | ')}; request lines: ${JSON.stringify(endings())}`)
  }, readerBoundMs)
  const saw = new Map<string, number>()
  for (const h of stalled) saw.set(h.answer || 'no answer', (saw.get(h.answer || 'no answer') ?? 0) + 1)
  t.comment(`what the stalled uploads' clients saw before the close: ${[...saw].map(([answer, n]) => `${answer} (${n})`).join(', ')}`)
  t.same(stalled.filter(h => h.closedAt! - h.lastByteAt > STALLED_BOUND_MS).map(h => h.closedAt! - h.lastByteAt), [], `stalled uploads closed within ${STALLED_BOUND_MS} ms of their last byte`)
  // A rate cut comes within its bound of the burst; a no-byte cut within a second of 2 minutes
  // without a byte (its own bound, counted from the instance's last byte, which the test cannot
  // see otherwise: the cut's line says how long the connection was idle).
  const rateCut = (l: Record<string, unknown>) => l.msg === 'connection cut: under the minimum transfer rate'
  t.same(cuts().filter(rateCut).map(l => (l.time as number) - openedBy).filter(ms => ms > readerBoundMs), [], `stopped readers cut by the minimum rate within ${readerBoundMs} ms`)
  t.same(cuts().filter(l => !rateCut(l)).map(l => l.idleMs as number).filter(ms => ms > STALL_MS + 1000), [], `those cut by the no-byte rule within a second of ${STALL_MS} ms without a byte`)
  // Reading again, each gets what the way to it still held, then the end of its connection.
  const got = readers.map(() => 0)
  for (const [i, h] of readers.entries()) {
    h.socket.on('data', (c: Buffer) => { got[i]! += c.length })
    h.socket.resume()
  }
  await eventually(async () => { if (readers.some(h => h.closedAt === undefined)) throw new Error('stopped readers reading again') }, 30_000)
    .catch(() => {})
  t.same(readers.filter(h => h.closedAt === undefined).map(h => h.socket.bytesRead), [], 'every stopped reader, reading again, finds its connection closed within 30 s (bytes it got)')
  t.same(got.filter(n => n >= readerFileBytes), [], 'every stopped reader was cut short of the file')
  // The first 300 tricklers have all been cut once their bound has passed.
  await eventually(async () => {
    if (tricklers.all.filter(h => h.closedAt !== undefined).length < 300) throw new Error('header tricklers still open')
  }, headersBoundMs + SLACK_MS)
  const cutTricklers = tricklers.all.filter(h => h.closedAt !== undefined)
  t.ok(cutTricklers.length >= 300, `header tricklers were cut and reopened (${cutTricklers.length} cut)`)
  const headersBound = headersBoundMs + SLACK_MS
  t.same(cutTricklers.filter(h => h.closedAt! - h.openedAt > headersBound).map(h => h.closedAt! - h.openedAt), [], `each within ${headersBound} ms of its start`)

  // Nothing the stalled uploads sent is stored: exactly what was there and the files answered 200.
  await eventually(async () => {
    const listed = await listStored(config)
    if (listed.length !== stored) throw new Error(`${listed.length} stored, ${stored} expected: ${listed.filter(k => /unfinished|tmp|part/.test(k)).join(', ')}`)
  }, 10_000)
  t.pass(`storage holds exactly the ${stored} objects it held before and the files answered 200`)
}
