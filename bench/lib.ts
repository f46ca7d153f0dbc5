/**
 * Shared helpers of the benchmark: options, logging, rounds and statistics, the service's
 * memory from /proc, generated bodies (never held whole) and the HTTP clients that send and
 * fetch them.
 */
import { createHash, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { EnvSchema } from '../src/config.js'
import { bytes } from '../test/helpers/streams.js'

export const MiB = 1024 * 1024
export const KiB = 1024

export const log = (msg: string) => process.stderr.write(`bench: ${msg}\n`)

/** Reasons to exit non-zero (bytes differ, memory follows the file size), printed at the end. */
export const failures: string[] = []
/** Problems that do not fail the run (a workload that could not run, a bar missed). */
export const notes: string[] = []

// --- statistics -------------------------------------------------------------------------------

export interface Stat { median: number, min: number, max: number, samples: number[] }

export function stat (samples: number[]): Stat {
  const s = [...samples].sort((a, b) => a - b)
  const n = s.length
  const median = n === 0 ? NaN : n % 2 === 1 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
  return { median, min: s[0] ?? NaN, max: s[n - 1] ?? NaN, samples }
}

/** One line of the table: a named measurement in some unit, over rounds. */
export interface Row {
  workload: string
  name: string
  unit: string
  stat: Stat
  /** Smaller is better (latency, memory); default false. */
  lowerIsBetter?: boolean
  /** Shown beside the numbers (e.g. p99 latency). */
  note?: string
  extra?: Record<string, unknown>
}

/** dropcode's median over the baseline's median, against a bar (≥ bar passes; for memory: ≤ bar). */
export interface Ratio {
  workload: string
  name: string
  value: number
  /** Per-round ratios' range, when both sides ran in the same rounds. */
  range?: [number, number]
  bar: number
  /** 'min': value ≥ bar passes; 'max': value ≤ bar passes. */
  kind: 'min' | 'max'
  unit?: string
  met: boolean
  /** Why it could not be measured in this run (value NaN; reported as such, not as missed). */
  unmeasured?: string
}

export function ratio (workload: string, name: string, ours: Stat, theirs: Stat, bar: number): Ratio {
  const value = ours.median / theirs.median
  const per = ours.samples.map((o, i) => o / (theirs.samples[i] ?? NaN)).filter(Number.isFinite)
  return {
    workload,
    name,
    value,
    ...(per.length > 0 ? { range: [Math.min(...per), Math.max(...per)] as [number, number] } : {}),
    bar,
    kind: 'min',
    met: value >= bar
  }
}

export function limit (workload: string, name: string, value: number, bar: number, unit: string): Ratio {
  return { workload, name, value, bar, kind: 'max', unit, met: value <= bar }
}

/**
 * Runs every contender once as a warm-up (results dropped), then `rounds` rounds, the order
 * alternating from round to round so that neither side always runs on a warmer machine.
 * @returns each contender's samples, in round order
 */
export async function alternate (rounds: number, contenders: Array<{ name: string, warmUp?: () => Promise<unknown>, run: (round: number) => Promise<number> }>): Promise<Map<string, number[]>> {
  const out = new Map(contenders.map(c => [c.name, [] as number[]]))
  for (const c of contenders) if (c.warmUp !== undefined) await c.warmUp()
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? contenders : [...contenders].reverse()
    for (const c of order) out.get(c.name)!.push(await c.run(r))
  }
  return out
}

/** Seconds taken by `work`. */
export async function timed<T> (work: () => Promise<T>): Promise<{ value: T, seconds: number }> {
  const t0 = performance.now()
  const value = await work()
  return { value, seconds: (performance.now() - t0) / 1000 }
}

// --- memory of a process ----------------------------------------------------------------------

/** VmRSS and VmHWM of `pid` in bytes; undefined once the process is gone. */
export function memoryOf (pid: number): { rss: number, hwm: number } | undefined {
  let status: string
  try { status = readFileSync(`/proc/${pid}/status`, 'utf8') } catch { return undefined }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') }
}

/** Runs `work` while sampling `pid`'s VmRSS every 25 ms; returns its result and the peak RSS. */
export async function peakRssDuring<T> (pid: number, work: () => Promise<T>): Promise<{ value: T, peak: number }> {
  let peak = memoryOf(pid)?.rss ?? 0
  const sample = () => { peak = Math.max(peak, memoryOf(pid)?.rss ?? 0) }
  const timer = setInterval(sample, 25)
  try {
    const value = await work()
    sample()
    return { value, peak }
  } finally {
    clearInterval(timer)
  }
}

// --- generated bytes --------------------------------------------------------------------------

const BLOCK = 64 * KiB
const blocks = new Map<number, Buffer>()
const block = (seed: number) => {
  let b = blocks.get(seed)
  if (b === undefined) { b = bytes(BLOCK, seed); blocks.set(seed, b) }
  return b
}

/** `size` generated bytes (a 64 KiB pseudo-random block repeated), streamed, never held. */
export function generated (size: number, seed = 1): Readable {
  const b = block(seed)
  let sent = 0
  return new Readable({
    highWaterMark: 4 * BLOCK,
    read () {
      if (sent >= size) { this.push(null); return }
      const n = Math.min(BLOCK, size - sent)
      sent += n
      this.push(n === BLOCK ? b : b.subarray(0, n))
    }
  })
}

const hashes = new Map<string, string>()
/** The sha256 of `parts` generated streams of `size` bytes each (as one file), computed once. */
export function generatedHash (size: number, parts = 1, seed = 1): string {
  const id = `${size}/${parts}/${seed}`
  let h = hashes.get(id)
  if (h === undefined) {
    const hash = createHash('sha256')
    const b = block(seed)
    for (let p = 0; p < parts; p++) {
      for (let off = 0; off < size; off += BLOCK) hash.update(off + BLOCK <= size ? b : b.subarray(0, size - off))
    }
    h = hash.digest('hex')
    hashes.set(id, h)
  }
  return h
}

// --- HTTP clients -----------------------------------------------------------------------------

export interface Answer { status: number, text: string }

async function readText (res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of res) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/** Fails a request when no byte moved for `ms`. */
function watchdog (req: http.ClientRequest, progress: () => number, ms = 120_000): () => void {
  let last = -1
  let since = Date.now()
  const timer = setInterval(() => {
    const now = progress()
    if (now !== last) { last = now; since = Date.now(); return }
    if (Date.now() - since > ms) req.destroy(new Error(`stalled: no byte moved for ${ms / 1000} s`))
  }, 1000)
  return () => clearInterval(timer)
}

export interface FormPart { name: string, value: string }

/**
 * A multipart/form-data POST: `fields` first, then one file part `fileField` streamed from
 * `body` (`size` bytes; the Content-Length is known up front). Answers with the status and body
 * even when the server answered early and closed while we were still sending.
 */
export async function postForm (url: string, opts: { fields?: FormPart[], fileField?: string, body?: Readable, size?: number, headers?: Record<string, string>, agent?: http.Agent | false }): Promise<Answer> {
  const boundary = `dropcode-bench-${randomBytes(8).toString('hex')}`
  const fieldBytes = Buffer.from((opts.fields ?? []).map(f => `--${boundary}\r\nContent-Disposition: form-data; name="${f.name}"\r\n\r\n${f.value}\r\n`).join(''))
  const head = opts.body === undefined
    ? Buffer.alloc(0)
    : Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${opts.fileField ?? 'file'}"; filename="bench.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`)
  const tail = Buffer.from(`${opts.body === undefined ? '' : '\r\n'}--${boundary}--\r\n`)
  const size = opts.body === undefined ? 0 : opts.size!
  const req = http.request(url, {
    method: 'POST',
    agent: opts.agent ?? false,
    headers: {
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': fieldBytes.length + head.length + size + tail.length,
      ...opts.headers
    }
  })
  let sent = 0
  const disarm = watchdog(req, () => sent)
  try {
    const responded = once(req, 'response') as Promise<[http.IncomingMessage]>
    const body = opts.body
    const sending = pipeline(async function * () {
      yield fieldBytes
      yield head
      if (body !== undefined) for await (const chunk of body) { sent += (chunk as Buffer).length; yield chunk as Buffer }
      yield tail
    }, req).then(() => undefined, (err: unknown) => err)
    const [res] = await responded
    const text = await readText(res)
    const sendError = await sending
    if (res.statusCode === 200 && sendError !== undefined) throw sendError
    return { status: res.statusCode ?? 0, text }
  } finally {
    disarm()
  }
}

/** GET `url`, hashing the body as it streams (never held); with the time to the last byte. */
export async function getHashed (url: string, agent: http.Agent | false = false): Promise<{ status: number, hash: string, size: number }> {
  const req = http.get(url, { agent })
  let received = 0
  const disarm = watchdog(req, () => received)
  try {
    const [res] = await once(req, 'response') as [http.IncomingMessage]
    const hash = createHash('sha256')
    for await (const chunk of res) { received += (chunk as Buffer).length; hash.update(chunk as Buffer) }
    return { status: res.statusCode ?? 0, hash: hash.digest('hex'), size: received }
  } finally {
    disarm()
  }
}

/** Records a failure when a transfer's bytes differ from what was sent. */
export function checkBytes (what: string, got: { hash: string, size: number }, want: { hash: string, size: number }): void {
  if (got.hash !== want.hash || got.size !== want.size) {
    failures.push(`${what}: bytes differ (got ${got.size} bytes, sha256 ${got.hash}; expected ${want.size} bytes, sha256 ${want.hash})`)
  }
}

/** Runs `task(0..count-1)`, at most `width` at once. */
export async function inParallel (count: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(width, count) }, async () => {
    while (next < count) await task(next++)
  }))
}

// --- a run --------------------------------------------------------------------------------------

export interface Context {
  quick: boolean
  /** Measured rounds per comparison (after one warm-up each). */
  rounds: number
  /** The large file, MiB (1024; --quick: 256). */
  largeMiB: number
  rows: Row[]
  ratios: Ratio[]
  /** The 1-minute load average when the run started (other work on the machine skews everything). */
  loadAtStart: number
}

export const mibPerSecond = (bytes: number, seconds: number) => bytes / MiB / seconds

export function addRow (ctx: Context, row: Row): Stat {
  ctx.rows.push(row)
  return row.stat
}

/** A setting's default from the service's config schema (src/config.ts). */
export function settingDefault (name: keyof typeof EnvSchema.properties): number {
  return Number((EnvSchema.properties[name] as { default?: string }).default)
}
