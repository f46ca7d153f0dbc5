/**
 * The embedded state store (LMDB) at scale: `npm run bench -- state` (or as part of `npm run
 * bench`). With BENCH_STATE_RECORDS live files (default 1,000,000) it measures
 *   - insert: FileStore.create for every record, 512 in flight (records/s);
 *   - reopen: closing the database and opening it again, up to the first answered lookup (ms);
 *   - restart: a real server process started on that DATA_DIR, until a HEAD of a stored code
 *     answers 200 (ms), beside the same for an empty DATA_DIR;
 *   - claims: 200,000 download claims over random codes, 256 in flight (claims/s);
 *   - housekeeping: all records expired at once and purged (records/s);
 * and the event loop's delay (p99, max) during each phase, sampled by monitorEventLoopDelay.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { newBlobKey, newCode } from '../src/core/ids.js'
import type { FileRecord } from '../src/core/model.js'
import { openLmdbBackend } from '../src/state/lmdb/index.js'
import { startServerProcess } from './server-process.js'

const HOUR = 3_600_000

export interface StateBenchResult {
  records: number
  insertPerSecond: number
  reopenMs: number
  restartMs: number
  restartEmptyMs: number
  claimsPerSecond: number
  purgePerSecond: number
  loopDelay: Record<'insert' | 'claims' | 'purge', { p99Ms: number, maxMs: number }>
  diskMiB: number
}

/** Runs `work` while sampling the event loop's delay. */
async function measured<T> (work: () => Promise<T>): Promise<{ result: T, seconds: number, p99Ms: number, maxMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 })
  h.enable()
  const t0 = performance.now()
  const result = await work()
  const seconds = (performance.now() - t0) / 1000
  h.disable()
  return { result, seconds, p99Ms: h.percentile(99) / 1e6, maxMs: h.max / 1e6 }
}

/** Runs `count` tasks with `width` in flight. */
async function inFlight (count: number, width: number, task: (i: number) => Promise<unknown>) {
  let next = 0
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) await task(next++)
  }))
}

export async function benchState (records: number, log: (msg: string) => void): Promise<StateBenchResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'dropcode-bench-state-'))
  try {
    const now = Date.now()
    const stateDir = path.join(dir, 'state')
    let state = await openLmdbBackend({ dir: stateDir, maxRecords: records + 1, now: Date.now, housekeepingMs: 0 })
    const codes: string[] = []
    const record = (): FileRecord => ({
      code: newCode(),
      blobKey: newBlobKey(),
      filename: 'artifact.tar.gz',
      contentType: 'application/gzip',
      size: 123_456_789,
      sha256: randomBytes(32).toString('hex'),
      maxDownloads: 1_000_000,
      downloads: 0,
      createdAt: now,
      expiresAt: now + HOUR,
      retainUntil: now + HOUR + 600_000
    })

    log(`state: inserting ${records} records`)
    const insert = await measured(() => inFlight(records, 512, async () => {
      const file = record()
      if (await state.files.create(file, now)) codes.push(file.code)
    }))
    const { size } = await import('node:fs/promises').then(fs => fs.stat(path.join(stateDir, 'lmdb', 'data.mdb')))

    log('state: reopening')
    await state.close()
    const t0 = performance.now()
    state = await openLmdbBackend({ dir: stateDir, maxRecords: records + 1, now: Date.now, housekeepingMs: 0 })
    const probe = codes[Math.floor(Math.random() * codes.length)]!
    if (!(await state.files.lookup(probe, now)).ok) throw new Error('a stored record is missing after reopening')
    const reopenMs = performance.now() - t0

    log('state: claims')
    const claimCount = Math.min(200_000, records)
    const claims = await measured(() => inFlight(claimCount, 256, async i => {
      const c = await state.files.claim(codes[(i * 7919) % codes.length]!, randomBytes(16).toString('base64url'), now, now + 1000)
      if (!c.ok) throw new Error(`claim failed: ${c.reason}`)
    }))
    await state.close()

    log('state: restarting a real server on it')
    const restart = await startServerProcess({ DATA_DIR: dir })
    const res = await fetch(`${restart.url}/download/${probe}`, { method: 'HEAD' })
    if (res.status !== 200) throw new Error(`HEAD after restart answered ${res.status}`)
    const restartMs = restart.readyMs
    await restart.stop()
    const emptyDir = await mkdtemp(path.join(os.tmpdir(), 'dropcode-bench-empty-'))
    const empty = await startServerProcess({ DATA_DIR: emptyDir })
    await empty.stop()
    await rm(emptyDir, { recursive: true, force: true })

    log('state: housekeeping of every record at once')
    state = await openLmdbBackend({ dir: stateDir, maxRecords: records + 1, now: Date.now, housekeepingMs: 0 })
    const purge = await measured(() => state.purge(now + 2 * HOUR))
    if (purge.result !== records) log(`state: purged ${purge.result} of ${records} entries`)
    await state.close()

    return {
      records,
      insertPerSecond: records / insert.seconds,
      reopenMs,
      restartMs,
      restartEmptyMs: empty.readyMs,
      claimsPerSecond: claimCount / claims.seconds,
      purgePerSecond: purge.result / purge.seconds,
      loopDelay: {
        insert: { p99Ms: insert.p99Ms, maxMs: insert.maxMs },
        claims: { p99Ms: claims.p99Ms, maxMs: claims.maxMs },
        purge: { p99Ms: purge.p99Ms, maxMs: purge.maxMs }
      },
      diskMiB: size / 1024 / 1024
    }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

export function stateTable (r: StateBenchResult): string {
  const f = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })
  return [
    `| embedded state, ${f(r.records)} live files | result | event loop p99 / max |`,
    '|---|---:|---:|',
    `| insert | ${f(r.insertPerSecond)} records/s | ${f(r.loopDelay.insert.p99Ms, 1)} / ${f(r.loopDelay.insert.maxMs, 1)} ms |`,
    `| reopen the database, first lookup | ${f(r.reopenMs, 1)} ms | |`,
    `| restart a server process, first HEAD answered | ${f(r.restartMs)} ms (empty DATA_DIR: ${f(r.restartEmptyMs)} ms) | |`,
    `| download claims | ${f(r.claimsPerSecond)} claims/s | ${f(r.loopDelay.claims.p99Ms, 1)} / ${f(r.loopDelay.claims.maxMs, 1)} ms |`,
    `| housekeeping: every record expired at once | ${f(r.purgePerSecond)} records/s | ${f(r.loopDelay.purge.p99Ms, 1)} / ${f(r.loopDelay.purge.maxMs, 1)} ms |`,
    `| database size | ${f(r.diskMiB)} MiB | |`
  ].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const records = Number(process.env.BENCH_STATE_RECORDS ?? 1_000_000)
  const result = await benchState(records, msg => process.stderr.write(`${msg}\n`))
  process.stdout.write(`${stateTable(result)}\n`)
}
