/**
 * Everything the benchmark starts, all on 127.0.0.1 and each stopped by its own pid: the service
 * (`node dist/server.js`, bench/server-process.ts) on either driver pair, a private redis-server
 * and a throw-away radosgw (the test helpers), the baseline processes of bench/peers/, and an S3
 * client for the direct baselines.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3'
import { startRedis, type TestRedis } from '../test/helpers/redis-server.js'
import { startS3, type TestS3 } from '../test/helpers/s3.js'
import { testS3Client } from '../test/helpers/s3-client.js'
import { log, MiB } from './lib.js'
import { startServerProcess, type BenchServer } from './server-process.js'

export type Driver = 'fs' | 's3'

const ROOT = path.resolve(import.meta.dirname, '..')

/** Node options for the service (e.g. BENCH_SERVER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'). */
const serverNodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(a => a !== '')
/** Extra settings for the service, as JSON (e.g. '{"S3_QUEUE_SIZE":"4"}'). */
const extraServerEnv = JSON.parse(process.env.BENCH_SERVER_ENV ?? '{}') as Record<string, string>

/** Cleanups run in reverse order by `stopAll`. */
const cleanups: Array<{ what: string, run: () => Promise<void> }> = []
export function onStop (what: string, run: () => Promise<void>): void { cleanups.push({ what, run }) }
export async function stopAll (): Promise<void> {
  for (const c of cleanups.reverse()) await c.run().catch(err => log(`stopping ${c.what} failed: ${String(err)}`))
  cleanups.length = 0
}

export async function tempDir (prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `dropcode-bench-${prefix}-`))
  onStop(`temp dir ${dir}`, () => rm(dir, { recursive: true, force: true }))
  return dir
}

// --- shared backends, started once on first use ------------------------------------------------

let redis: Promise<TestRedis> | undefined
let s3: Promise<TestS3> | undefined
let s3MemoryBytes = 4096 * MiB

/** RAM for the radosgw's in-memory OSD (set before first use). */
export function setS3Memory (bytes: number): void { s3MemoryBytes = bytes }

export async function theRedis (): Promise<TestRedis> {
  redis ??= startRedis().then(r => { onStop('redis-server', () => r.stop()); return r })
  return await redis
}

export async function theS3 (): Promise<TestS3> {
  s3 ??= startS3({ memstoreBytes: s3MemoryBytes }).then(s => {
    onStop(`S3 (${s.kind})`, () => s.stop())
    log(`S3 is ${s.kind} at ${s.endpoint}`)
    return s
  })
  return await s3
}

/** An S3 client for the direct baselines, with a fresh bucket. */
export async function s3Client (): Promise<{ client: S3Client, bucket: string, s3: TestS3 }> {
  const s3 = await theS3()
  const client = testS3Client(s3)
  onStop('S3 client', async () => client.destroy())
  const bucket = `dropcode-bench-${Math.random().toString(36).slice(2, 10)}`
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
  return { client, bucket, s3 }
}

// --- the service ------------------------------------------------------------------------------

/** The service on `driver` (fs: fs+local; s3: s3+redis), a fresh process; stopped by stopAll or by hand. */
export async function startService (driver: Driver, env: Record<string, string> = {}): Promise<BenchServer> {
  const dataDir = await tempDir('data')
  const base: Record<string, string> = { DATA_DIR: dataDir, MAX_FILE_SIZE: String(8 * 1024 * MiB), MAX_DOWNLOADS: '1000000', DRAIN_DELAY_SECONDS: '0' }
  if (driver === 's3') {
    const [s3, r] = await Promise.all([theS3(), theRedis()])
    Object.assign(base, s3.env(), { STATE_DRIVER: 'redis', REDIS_URL: r.url, REDIS_PREFIX: `bench${Math.random().toString(36).slice(2, 8)}:` })
  }
  const server = await startServerProcess({ ...base, ...env, ...extraServerEnv }, serverNodeArgs)
  let stopped = false
  const stop = server.stop.bind(server)
  server.stop = async () => { if (!stopped) { stopped = true; await stop() } }
  onStop(`service pid ${server.pid}`, () => server.stop())
  return server
}

// --- baseline processes -----------------------------------------------------------------------

export interface Peer { pid: number, url: string, child: ChildProcess, stop (): Promise<void> }

/** `node --import=tsx bench/peers/SCRIPT args…`, up once it prints `listening URL`. */
export async function startPeer (script: string, args: string[], env: Record<string, string> = {}): Promise<Peer> {
  const child = spawn(process.execPath, ['--import=tsx', path.join(ROOT, 'bench/peers', script), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  child.stderr!.pipe(process.stderr)
  const killOnExit = () => child.kill('SIGKILL')
  process.once('exit', killOnExit)
  const stop = async () => {
    process.off('exit', killOnExit)
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }
  onStop(`${script} pid ${child.pid}`, stop)
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not listen within 30 s`)), 30_000)
    createInterface({ input: child.stdout! }).on('line', line => {
      const m = /^listening (http:\/\/127\.0\.0\.1:\d+)$/.exec(line)
      if (m !== null) { clearTimeout(timer); resolve(m[1]!) }
    })
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`${script} exited with ${code}`)) })
  })
  return { pid: child.pid!, url, child, stop }
}
