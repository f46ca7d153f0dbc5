/** The service as a child process for benchmarks: `node` runs the entry point directly, so its pid is the server's. */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from '../test/helpers/ports.js'

export const BENCH_KEY = 'bench-key'
const ROOT = path.resolve(import.meta.dirname, '..')

export interface BenchServer {
  pid: number
  url: string
  child: ChildProcess
  /** ms from spawning to the first answered request. */
  readyMs: number
  /** SIGTERM and wait (SIGKILL after 30 s); rejects on a non-zero exit. */
  stop (): Promise<void>
}

export async function startServerProcess (env: Record<string, string>, nodeArgs: string[] = []): Promise<BenchServer> {
  const port = await freePort()
  const inherited = Object.fromEntries(['PATH', 'HOME', 'TMPDIR'].flatMap(k => process.env[k] === undefined ? [] : [[k, process.env[k]!]]))
  const t0 = performance.now()
  const child = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'dist/server.js')], { // `npm run bench` builds it first
    cwd: ROOT,
    // Only what we set: a stray S3_BUCKET or REDIS_URL in the caller's shell must not switch drivers.
    // The guessing limit is off: the load comes from one address, which would measure 429s.
    env: { ...inherited, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', RATE_LIMIT_FAILED_LOOKUPS: '0', ...env, PORT: String(port), HOST: '127.0.0.1', API_KEYS: BENCH_KEY, LOG_LEVEL: 'warn' },
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
      await fetch(`${url}/healthz`)
      break
    } catch {
      if (Date.now() > deadline) throw new Error('server did not listen within 60 s')
      await sleep(20)
    }
  }
  const readyMs = performance.now() - t0
  return {
    pid: child.pid,
    url,
    child,
    readyMs,
    async stop () {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
      child.kill('SIGINT') // no drain delay
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
      const [code, signal] = await exited
      clearTimeout(timer)
      if (code !== 0) throw new Error(`server exited with code ${code}, signal ${signal}`)
    }
  }
}
