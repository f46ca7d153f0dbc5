/**
 * The benchmark's output: the Markdown table (medians, min–max, ratios against their bars) on
 * stdout and `bench/results.json` with the machine, Node, package and backend versions.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Context, Ratio, Row } from './lib.js'

const ROOT = path.resolve(import.meta.dirname, '..')

const PACKAGES = [
  'fastify', '@fastify/multipart', '@aws-sdk/client-s3', '@aws-sdk/lib-storage', 'ioredis', 'lmdb',
  'autocannon', '@tus/server', '@tus/file-store', '@tus/s3-store', 'tus-js-client'
]

function packageVersion (name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return 'not installed'
  }
}

function commandVersion (cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] }).split('\n')[0]!.trim()
  } catch {
    return 'not found'
  }
}

export function machine () {
  const cpus = os.cpus()
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism(),
    cpu: cpus[0]?.model ?? 'unknown',
    ramGiB: Math.round(os.totalmem() / 1024 ** 3 * 10) / 10,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    /** Other work on the machine: the 1-minute load average when the table was made. */
    loadAverage: Math.round(os.loadavg()[0]! * 10) / 10
  }
}

export function versions () {
  const own = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
  let commit = 'unknown'
  try { commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() } catch { /* not a checkout */ }
  return {
    dropcode: `${own.version} (${commit})`,
    packages: Object.fromEntries(PACKAGES.map(p => [p, packageVersion(p)])),
    backends: {
      radosgw: commandVersion('radosgw', ['--version']),
      'redis-server': commandVersion('redis-server', ['--version'])
    }
  }
}

const num = (n: number) => !Number.isFinite(n) ? 'n/a' : Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(1)

function rowLine (r: Row): string {
  const { median, min, max, samples } = r.stat
  const range = samples.length > 1 ? `${num(min)}–${num(max)}` : ''
  const value = Number.isFinite(median) ? `${num(median)} ${r.unit}` : 'n/a'
  return `| ${r.workload} | ${r.name} | ${value} | ${range} | ${r.note ?? ''} |`
}

function ratioLine (q: Ratio): string {
  const value = !Number.isFinite(q.value) ? 'n/a' : q.kind === 'min' ? q.value.toFixed(2) : `${num(q.value)} ${q.unit ?? ''}`.trim()
  const range = q.range !== undefined ? `${q.range[0].toFixed(2)}–${q.range[1].toFixed(2)}` : ''
  const bar = q.kind === 'min' ? `≥ ${q.bar.toFixed(2)}` : `< ${q.bar} ${q.unit ?? ''}`.trim()
  return `| ${q.workload} | ${q.name} | ${value} | ${range} | ${bar} | ${q.unmeasured !== undefined ? `not measured: ${q.unmeasured}` : q.met ? 'met' : '**missed**'} |`
}

export function table (ctx: Context, extra: string[]): string {
  const m = machine()
  return [
    `dropcode benchmark ${m.date.slice(0, 16)}Z${ctx.quick ? ' (--quick)' : ''}: ${m.nproc} × ${m.cpu}, ${m.ramGiB} GiB RAM, Node ${m.node}; ` +
      `${ctx.rounds} rounds after a warm-up, large file ${ctx.largeMiB} MiB; medians with min–max over the rounds; ` +
      `load average ${ctx.loadAtStart.toFixed(1)} at the start, ${m.loadAverage.toFixed(1)} at the end`,
    '',
    '| workload | measurement | median | min–max | notes |',
    '|---|---|---:|---:|---|',
    ...ctx.rows.map(rowLine),
    '',
    'Ratios (dropcode\'s median / the baseline\'s median, same run; per-round range beside) and limits:',
    '',
    '| workload | ratio or limit | value | per round | bar | |',
    '|---|---|---:|---:|---:|---|',
    ...ctx.ratios.map(ratioLine),
    ...extra
  ].join('\n')
}

export function writeResults (file: string, ctx: Context, extra: Record<string, unknown>, failures: string[], seconds: number): void {
  writeFileSync(file, JSON.stringify({
    machine: machine(),
    versions: versions(),
    options: { quick: ctx.quick, rounds: ctx.rounds, largeMiB: ctx.largeMiB, loadAverageAtStart: ctx.loadAtStart },
    seconds: Math.round(seconds),
    rows: ctx.rows,
    ratios: ctx.ratios,
    ...extra,
    failures
  }, null, 2) + '\n')
}
