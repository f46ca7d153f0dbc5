/**
 * dropcode's benchmark: `npm run bench` (about 8 minutes on 2 cores), `npm run bench -- --quick`
 * (under 2). See bench/README.md.
 *
 * Starts everything on 127.0.0.1 (the service as `node dist/server.js`, a private redis-server,
 * a throw-away radosgw, the baselines of bench/peers/), runs each workload after a warm-up in
 * alternating rounds, prints a Markdown table of medians (min–max) with the ratios to the
 * baselines measured in the same run, and writes bench/results.json.
 *
 *   --quick           smaller files, fewer rounds, 100,000 state records
 *   --only LIST       workloads by number or name: 1 upload, 2 download, 3 memory, 4 chunked,
 *                     5 small, 6 tus, 7 state, 8 cli (2 needs 1: it downloads what 1 uploaded)
 *   --drivers LIST    fs, s3 (default both)
 *   --rounds N        measured rounds per comparison (default 3; --quick 2)
 *   --out FILE        results file (default bench/results.json)
 *
 * Exits 1 only when bytes differ or memory follows the file size (or a workload cannot run);
 * a missed bar is reported, not failed.
 */
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { setS3Memory, stopAll, type Driver } from './backends.js'
import { failures, log, MiB, notes, stat, type Context } from './lib.js'
import { table, writeResults } from './report.js'
import { benchState, stateTable, type StateBenchResult } from './state.js'
import { benchUpload } from './w1-upload.js'
import { benchDownload } from './w2-download.js'
import { benchMemory } from './w3-memory.js'
import { benchChunked } from './w4-chunked.js'
import { benchSmall } from './w5-small.js'
import { benchTus } from './w6-tus.js'
import { benchCli } from './w8-cli.js'

const WORKLOADS = ['upload', 'download', 'memory', 'chunked', 'small', 'tus', 'state', 'cli'] as const
type Workload = typeof WORKLOADS[number]

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    drivers: { type: 'string', default: process.env.BENCH_DRIVERS ?? 'fs,s3' },
    rounds: { type: 'string' },
    out: { type: 'string', default: path.join(import.meta.dirname, 'results.json') }
  }
})

const list = (s: string) => s.split(',').map(x => x.trim()).filter(x => x !== '')
const only = new Set<Workload>(args.only === undefined
  ? WORKLOADS
  : list(args.only).map(w => {
    const byNumber = WORKLOADS[Number(w) - 1]
    const name = byNumber ?? w
    if (!(WORKLOADS as readonly string[]).includes(name)) throw new Error(`--only: unknown workload ${JSON.stringify(w)} (known: ${WORKLOADS.map((x, i) => `${i + 1} ${x}`).join(', ')})`)
    return name as Workload
  }))
if (only.has('download')) only.add('upload')
const drivers = list(args.drivers).map(d => {
  if (d !== 'fs' && d !== 's3') throw new Error(`--drivers: unknown driver ${JSON.stringify(d)} (fs, s3)`)
  return d as Driver
})

const ctx: Context = {
  quick: args.quick,
  rounds: Number(args.rounds ?? (args.quick ? 2 : 3)),
  largeMiB: Number(process.env.BENCH_SIZE_MIB ?? (args.quick ? 256 : 1024)),
  rows: [],
  ratios: [],
  loadAtStart: os.loadavg()[0]!
}
if (!Number.isSafeInteger(ctx.rounds) || ctx.rounds < 1) throw new Error('--rounds must be a positive integer')
// The throw-away radosgw keeps objects in RAM (allocated as used): room for a few large files
// while its garbage collector (10–30 s) catches up with deleted ones.
setS3Memory(Math.max(4096, 10 * ctx.largeMiB) * MiB)

const t0 = performance.now()
const extraLines: string[] = []
const extraResults: Record<string, unknown> = {}
let state: StateBenchResult | undefined

async function step (name: string, work: () => Promise<void>): Promise<void> {
  const t = performance.now()
  log(`--- ${name}`)
  try {
    await work()
  } catch (err) {
    failures.push(`${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`)
  }
  log(`--- ${name}: ${((performance.now() - t) / 1000).toFixed(0)} s`)
}

try {
  for (const driver of drivers) {
    if (!only.has('upload')) break
    await step(`1/2 upload and download, ${driver}`, async () => {
      const stored = await benchUpload(ctx, driver)
      try {
        if (only.has('download')) await benchDownload(ctx, stored)
      } finally {
        await stored.server.stop()
        await stored.peer?.stop()
      }
    })
  }
  if (only.has('memory')) await step('3 memory', () => benchMemory(ctx, drivers))
  if (only.has('chunked') && drivers.includes('s3')) await step('4 chunked upload', () => benchChunked(ctx))
  if (only.has('small')) await step('5 small requests', () => benchSmall(ctx, drivers))
  for (const driver of drivers) {
    if (only.has('tus')) await step(`6 tus, ${driver}`, () => benchTus(ctx, driver))
  }
  for (const driver of drivers) {
    if (only.has('cli')) await step(`8 cli vs curl, ${driver}`, () => benchCli(ctx, driver))
  }
  if (only.has('state')) {
    await step('7 embedded state', async () => {
      const records = Number(process.env.BENCH_STATE_RECORDS ?? (ctx.quick ? 100_000 : 1_000_000))
      state = await benchState(records, msg => log(msg))
      const w = '7 state'
      ctx.rows.push(
        { workload: w, name: `LMDB insert, ${records.toLocaleString('en-US')} records`, unit: 'records/s', stat: stat([state.insertPerSecond]), note: `event loop p99 ${state.loopDelay.insert.p99Ms.toFixed(1)} ms` },
        { workload: w, name: 'restart a server process on it, first HEAD answered', unit: 'ms', lowerIsBetter: true, stat: stat([state.restartMs]), note: `empty DATA_DIR ${state.restartEmptyMs.toFixed(0)} ms; reopen + first lookup ${state.reopenMs.toFixed(1)} ms` },
        { workload: w, name: 'download claims', unit: 'claims/s', stat: stat([state.claimsPerSecond]), note: `event loop p99 ${state.loopDelay.claims.p99Ms.toFixed(1)} ms` }
      )
      extraLines.push('', stateTable(state))
      extraResults.state = state
    })
  }
} finally {
  await stopAll()
}

const seconds = (performance.now() - t0) / 1000
extraLines.push('', `Finished in ${seconds.toFixed(0)} s.`)
for (const n of notes) extraLines.push(`Note: ${n}`)
process.stdout.write(table(ctx, extraLines) + '\n')
writeResults(args.out, ctx, { ...extraResults, notes }, failures, seconds)
log(`results in ${path.relative(process.cwd(), args.out)}; ${os.availableParallelism()} cores`)

if (failures.length > 0) {
  for (const f of failures) process.stderr.write(`bench: FAIL: ${f}\n`)
  process.exitCode = 1
}
