/**
 * dropcode benchmark: `npm run bench` (see bench/README.md).
 *
 * For each driver pair (fs+local, s3+redis) it starts the service as a separate child process
 * (`node --import=tsx src/server.ts`, so /proc/<pid> is the server alone) and measures:
 *   1. one streamed multipart upload of BENCH_SIZE_MIB MiB (bytes generated on the fly) → MiB/s
 *   2. the download of that file, hashed with sha256 and compared with what was sent → MiB/s
 *   3. the server's VmRSS, sampled every 50 ms: idle before the upload, peak during each phase
 *   4. BENCH_SMALL_COUNT uploads of 10 KiB at concurrency 8, then as many downloads → requests/s
 * and prints a Markdown table on stdout (progress and failures go to stderr).
 *
 * Exits non-zero when a download's hash differs from the upload's, or when the server grows
 * more than 256 MiB over its idle RSS during a phase: a transfer may cost the S3 part buffers
 * (S3_PART_SIZE × (S3_QUEUE_SIZE + 1) = 40 MiB by default), never the file size.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { pipeline } from 'node:stream/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from '../test/helpers/ports.js'
import { startRedis } from '../test/helpers/redis-server.js'
import { startS3 } from '../test/helpers/s3.js'
import { byteStream, bytes, sha256, sha256Of } from '../test/helpers/streams.js'

const MiB = 1024 * 1024
const PAIRS = ['fs+local', 's3+redis'] as const
type Pair = typeof PAIRS[number]

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`)
  return n
}

const SIZE_MIB = intEnv('BENCH_SIZE_MIB', 1024)
const SMALL_COUNT = intEnv('BENCH_SMALL_COUNT', 200)
const SMALL_SIZE = 10 * 1024
const SMALL_CONCURRENCY = 8
/** Largest file the helper's radosgw holds: its memstore OSD has 1 GiB of RAM and stops writes at 95 % full. */
const RADOSGW_MAX_MIB = intEnv('BENCH_RADOSGW_MAX_MIB', 4096)
const RSS_GROWTH_LIMIT_MIB = 256
const SAMPLE_MS = 50
/** A transfer that moves no byte for this long is failed instead of hanging the bench. */
const STALL_MS = 120_000
const API_KEY = 'bench-key'
const ROOT = path.resolve(import.meta.dirname, '..')

const pairs: Pair[] = (process.env.BENCH_PAIRS ?? PAIRS.join(',')).split(',').map(p => p.trim()).filter(p => p !== '').map(p => {
  if (!(PAIRS as readonly string[]).includes(p)) throw new Error(`BENCH_PAIRS: unknown pair ${JSON.stringify(p)} (known: ${PAIRS.join(', ')})`)
  return p as Pair
})

const log = (msg: string) => process.stderr.write(`bench: ${msg}\n`)
/** Reasons to exit non-zero, printed at the end. */
const failures: string[] = []

// --- the server's memory, from /proc --------------------------------------------------------

/** VmRSS and VmHWM of `pid` in bytes; undefined once the process is gone. */
function memoryOf (pid: number): { rss: number, hwm: number } | undefined {
  let status: string
  try { status = readFileSync(`/proc/${pid}/status`, 'utf8') } catch { return undefined }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') }
}

/** Runs `work` while sampling the server's VmRSS every 50 ms; returns its result and the peak RSS. */
async function peakRssDuring<T> (pid: number, work: () => Promise<T>): Promise<{ value: T, peak: number }> {
  let peak = memoryOf(pid)?.rss ?? 0
  const sample = () => { peak = Math.max(peak, memoryOf(pid)?.rss ?? 0) }
  const timer = setInterval(sample, SAMPLE_MS)
  try {
    const value = await work()
    sample()
    return { value, peak }
  } finally {
    clearInterval(timer)
  }
}

// --- the service as a child process -----------------------------------------------------------

interface Server { pid: number, url: string, child: ChildProcess }

async function startServer (env: Record<string, string>): Promise<Server> {
  const port = await freePort()
  const inherited = Object.fromEntries(['PATH', 'HOME', 'TMPDIR'].flatMap(k => process.env[k] === undefined ? [] : [[k, process.env[k]!]]))
  const child = spawn(process.execPath, ['--import=tsx', path.join(ROOT, 'src/server.ts')], {
    cwd: ROOT,
    // Only what we set: a stray S3_BUCKET or REDIS_URL in the caller's shell must not switch drivers.
    env: { ...inherited, ...env, PORT: String(port), HOST: '127.0.0.1', API_KEYS: API_KEY, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  child.stdout!.pipe(process.stderr)
  child.stderr!.pipe(process.stderr)
  const killOnExit = () => child.kill('SIGKILL')
  process.once('exit', killOnExit)
  child.once('exit', () => process.off('exit', killOnExit))
  if (child.pid === undefined) throw new Error('could not spawn the server')

  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  while (true) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`server exited during start-up (code ${child.exitCode}, signal ${child.signalCode})`)
    try {
      await fetch(`${url}/download/AAAAAA`) // any answer (404) means it listens
      return { pid: child.pid, url, child }
    } catch {
      if (Date.now() > deadline) throw new Error('server did not listen within 60 s')
      await sleep(100)
    }
  }
}

/** SIGTERM, then wait (SIGKILL after 30 s); a non-zero exit is reported as a failure. */
async function stopServer ({ child }: Server): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  const [code, signal] = await exited
  clearTimeout(timer)
  if (code !== 0) failures.push(`server exited with code ${code}, signal ${signal} after SIGTERM`)
}

// --- HTTP client ------------------------------------------------------------------------------

/** Fails `req` when `progress()` has not moved for STALL_MS; returns a function that disarms it. */
function watchdog (req: http.ClientRequest, what: string, progress: () => number): () => void {
  let last = progress()
  let since = Date.now()
  const timer = setInterval(() => {
    const now = progress()
    if (now !== last) { last = now; since = Date.now(); return }
    if (Date.now() - since > STALL_MS) req.destroy(new Error(`${what} stalled: no byte moved for ${STALL_MS / 1000} s (at ${(now / MiB).toFixed(1)} MiB)`))
  }, 1000)
  return () => clearInterval(timer)
}

async function readText (res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of res) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * POST /upload with one file part streamed from `body` (`size` bytes, so Content-Length is known
 * up front). Returns the code and the sha256 of the file bytes sent.
 */
async function upload (url: string, body: AsyncIterable<Buffer> | Iterable<Buffer>, size: number, agent: http.Agent | false): Promise<{ code: string, hash: string }> {
  const boundary = `dropcode-bench-${randomBytes(8).toString('hex')}`
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`)
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  const req = http.request(`${url}/upload`, {
    method: 'POST',
    agent,
    headers: {
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': head.length + size + tail.length,
      'x-client-key': API_KEY
    }
  })
  const hash = createHash('sha256')
  let sent = 0
  const disarm = watchdog(req, 'upload', () => sent)
  try {
    const responded = once(req, 'response') as Promise<[http.IncomingMessage]>
    const sending = pipeline(async function * () {
      yield head
      for await (const chunk of body) {
        hash.update(chunk)
        sent += chunk.length
        yield chunk
      }
      yield tail
    }, req).then(() => undefined, (err: unknown) => err)
    const [res] = await responded
    const text = await readText(res)
    const sendError = await sending
    if (res.statusCode !== 200) throw new Error(`upload answered ${res.statusCode}: ${text.slice(0, 500)}`)
    if (sendError !== undefined) throw sendError
    if (sent !== size) throw new Error(`upload sent ${sent} bytes, expected ${size}`)
    return { code: (JSON.parse(text) as { code: string }).code, hash: hash.digest('hex') }
  } finally {
    disarm()
  }
}

/** GET /download/{code}; returns the sha256 and size of the body, never holding it. */
async function download (url: string, code: string, agent: http.Agent | false): Promise<{ hash: string, size: number }> {
  const req = http.get(`${url}/download/${code}`, { agent })
  let received = 0
  const disarm = watchdog(req, 'download', () => received)
  try {
    const [res] = await once(req, 'response') as [http.IncomingMessage]
    if (res.statusCode !== 200) throw new Error(`download ${code} answered ${res.statusCode}: ${(await readText(res)).slice(0, 500)}`)
    return await sha256((async function * () {
      for await (const chunk of res) {
        received += (chunk as Buffer).length
        yield chunk as Buffer
      }
    })())
  } finally {
    disarm()
  }
}

/** Runs `task(0..count-1)` with at most `concurrency` at a time; returns requests per second. */
async function throughput (count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<number> {
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) await task(next++)
  }))
  return count / ((performance.now() - started) / 1000)
}

// --- one driver pair --------------------------------------------------------------------------

interface Row {
  pair: string
  sizeMiB: number
  uploadMiBs: number
  downloadMiBs: number
  idleRss: number
  peakUpload: number
  peakDownload: number
  hwm: number
  smallUploads: number
  smallDownloads: number
}

async function measure (pair: Pair, sizeMiB: number, env: Record<string, string>): Promise<Row> {
  const size = sizeMiB * MiB
  const server = await startServer({ ...env, MAX_FILE_SIZE: String(2 * size + MiB) })
  try {
    await sleep(1000) // let start-up garbage settle
    const idleRss = memoryOf(server.pid)!.rss

    log(`${pair}: uploading ${sizeMiB} MiB`)
    let t0 = performance.now()
    const up = await peakRssDuring(server.pid, () => upload(server.url, byteStream(size), size, false))
    const uploadSeconds = (performance.now() - t0) / 1000

    log(`${pair}: downloading ${sizeMiB} MiB`)
    t0 = performance.now()
    const down = await peakRssDuring(server.pid, () => download(server.url, up.value.code, false))
    const downloadSeconds = (performance.now() - t0) / 1000
    if (down.value.size !== size || down.value.hash !== up.value.hash) {
      failures.push(`${pair}: the download differs from the upload (${down.value.size} bytes, sha256 ${down.value.hash}; sent ${size} bytes, sha256 ${up.value.hash})`)
    }
    for (const [phase, peak] of [['upload', up.peak], ['download', down.peak]] as const) {
      const growth = (peak - idleRss) / MiB
      if (growth > RSS_GROWTH_LIMIT_MIB) {
        failures.push(`${pair}: server RSS grew by ${growth.toFixed(0)} MiB over idle during the ${sizeMiB} MiB ${phase} (limit ${RSS_GROWTH_LIMIT_MIB} MiB): memory follows the file size`)
      }
    }

    // A failure here keeps the large-file numbers above (the small columns then read n/a).
    log(`${pair}: ${SMALL_COUNT} small uploads and downloads`)
    let smallUploads = NaN
    let smallDownloads = NaN
    const agent = new http.Agent({ keepAlive: true, maxSockets: SMALL_CONCURRENCY })
    try {
      const codes: string[] = []
      const hashes: string[] = []
      smallUploads = await throughput(SMALL_COUNT, SMALL_CONCURRENCY, async i => {
        const data = bytes(SMALL_SIZE, i + 1)
        hashes[i] = sha256Of(data)
        codes[i] = (await upload(server.url, [data], SMALL_SIZE, agent)).code
      })
      smallDownloads = await throughput(SMALL_COUNT, SMALL_CONCURRENCY, async i => {
        const got = await download(server.url, codes[i]!, agent)
        if (got.hash !== hashes[i]) failures.push(`${pair}: small file ${i} (${codes[i]}) came back different`)
      })
    } catch (err) {
      failures.push(`${pair}: small files: ${err instanceof Error ? err.message : String(err)}`)
    } finally {
      agent.destroy()
    }

    return {
      pair,
      sizeMiB,
      uploadMiBs: sizeMiB / uploadSeconds,
      downloadMiBs: sizeMiB / downloadSeconds,
      idleRss,
      peakUpload: up.peak,
      peakDownload: down.peak,
      hwm: memoryOf(server.pid)?.hwm ?? NaN,
      smallUploads,
      smallDownloads
    }
  } finally {
    await stopServer(server)
  }
}

async function runPair (pair: Pair): Promise<Row> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'dropcode-bench-'))
  const cleanups: Array<() => Promise<void>> = [() => rm(dataDir, { recursive: true, force: true })]
  try {
    if (pair === 'fs+local') return await measure(pair, SIZE_MIB, { DATA_DIR: dataDir })

    const redis = await startRedis()
    cleanups.push(() => redis.stop())
    // radosgw keeps objects in RAM: room for the large file, the small ones, and slack.
    const s3 = await startS3({ memstoreBytes: Math.max(1024, 3 * SIZE_MIB) * 1024 * 1024 })
    cleanups.push(() => s3.stop())
    let sizeMiB = SIZE_MIB
    if (s3.kind === 'radosgw' && sizeMiB > RADOSGW_MAX_MIB) {
      log(`s3+redis: the test radosgw keeps objects in RAM; using ${RADOSGW_MAX_MIB} MiB instead of ${SIZE_MIB} MiB`)
      sizeMiB = RADOSGW_MAX_MIB
    }
    log(`s3+redis: S3 is ${s3.kind} at ${s3.endpoint}, Redis at ${redis.url}`)
    return await measure(pair, sizeMiB, { ...s3.env(), STATE_DRIVER: 'redis', REDIS_URL: redis.url, DATA_DIR: dataDir })
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(err => log(`cleanup failed: ${String(err)}`))
  }
}

// --- main -------------------------------------------------------------------------------------

const rows: Row[] = []
for (const pair of pairs) {
  try {
    rows.push(await runPair(pair))
  } catch (err) {
    failures.push(`${pair}: ${err instanceof Error ? err.message : String(err)}`)
  }
}

const mib = (b: number) => (b / MiB).toFixed(0)
const fixed = (n: number) => Number.isNaN(n) ? 'n/a' : n.toFixed(1)
const lines = [
  `dropcode benchmark, ${new Date().toISOString().slice(0, 10)}: nproc ${os.availableParallelism()}, ` +
    `${(os.totalmem() / 1024 ** 3).toFixed(0)} GiB RAM, Node ${process.version}, ${os.type()} ${os.release()}; ` +
    `large file ${SIZE_MIB} MiB, ${SMALL_COUNT} small files of 10 KiB at concurrency ${SMALL_CONCURRENCY}; RSS in MiB`,
  '',
  '| pair | upload MiB/s | download MiB/s | idle RSS | peak RSS upload | peak RSS download | small uploads/s | small downloads/s |',
  '|---|---:|---:|---:|---:|---:|---:|---:|',
  ...rows.map(r => `| ${r.pair}${r.sizeMiB !== SIZE_MIB ? ` (${r.sizeMiB} MiB file)` : ''} | ${fixed(r.uploadMiBs)} | ${fixed(r.downloadMiBs)} | ` +
    `${mib(r.idleRss)} | ${mib(r.peakUpload)} | ${mib(r.peakDownload)} | ${fixed(r.smallUploads)} | ${fixed(r.smallDownloads)} |`),
  '',
  ...rows.map(r => `${r.pair}: RSS growth over idle: upload +${mib(r.peakUpload - r.idleRss)} MiB, download +${mib(r.peakDownload - r.idleRss)} MiB; ` +
    `VmHWM (the server's lifetime peak) ${mib(r.hwm)} MiB`)
]
process.stdout.write(lines.join('\n') + '\n')

if (failures.length > 0) {
  for (const f of failures) process.stderr.write(`bench: FAIL: ${f}\n`)
  process.exitCode = 1
}
