/** The service as a child process for benchmarks: `node` runs the entry point directly, so its pid is the server's. */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from '../test/helpers/ports.js'

export const BENCH_KEY = 'bench-key'
const ROOT = path.resolve(import.meta.dirname, '..')

export interface BenchServer {
  pid: number
  url: string
  /** The metrics listener's URL, from the start-up banner (METRICS_PORT=0: a free port, so instances never collide on 9464). */
  metricsUrl: string
  child: ChildProcess
  /** ms from spawning to the first answered request. */
  readyMs: number
  /** SIGTERM and wait (SIGKILL after 30 s); rejects on a non-zero exit. */
  stop (): Promise<void>
}

/** Prints a log file's warning count and its first error lines (read line by line: workload 5 logs every one of its requests), then removes it. */
async function summarizeLog (file: string, port: number): Promise<void> {
  const errors: string[] = []
  let warnings = 0
  try {
    for await (const line of createInterface({ input: fs.createReadStream(file) })) {
      if (line.startsWith('{"level":40,')) warnings++
      else if (/^\{"level":[56]0,/.test(line)) errors.push(line)
    }
  } finally {
    fs.rmSync(file, { force: true })
  }
  if (errors.length > 0 || warnings > 0) process.stderr.write(`server on port ${port}: ${warnings} warning lines, ${errors.length} error lines\n${errors.slice(0, 20).join('\n')}\n`)
}

/**
 * Starts `node dist/server.js` with `env`. LOG_LEVEL is warn unless `env` says otherwise. The log
 * goes to a temporary file, as a log collector would take it, never through this process: a
 * pipe that this busy process drained late filled up, and the server's synchronous log writes
 * slept on it (sonic-boom retries EAGAIN; 0.8 s of a 25 s profile of 2,000 concurrent uploads),
 * which added to the event loop's lag and to the load the service shed. A count of its warning
 * lines, and its error lines, are printed when it exits.
 */
export async function startServerProcess (env: Record<string, string>, nodeArgs: string[] = []): Promise<BenchServer> {
  const port = await freePort()
  const inherited = Object.fromEntries(['PATH', 'HOME', 'TMPDIR'].flatMap(k => process.env[k] === undefined ? [] : [[k, process.env[k]!]]))
  const logLevel = env.LOG_LEVEL ?? 'warn'
  const logFile = path.join(os.tmpdir(), `dropcode-bench-${port}.log`)
  const logFd = fs.openSync(logFile, 'w')
  const t0 = performance.now()
  const child = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'dist/server.js')], { // `npm run bench` builds it first
    cwd: ROOT,
    // Only what we set: a stray S3_BUCKET or REDIS_URL in the caller's shell must not switch drivers.
    // The guessing limit is off: the load comes from one address, which would measure 429s.
    env: { ...inherited, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', RATE_LIMIT_FAILED_LOOKUPS: '0', ...env, PORT: String(port), METRICS_PORT: '0', HOST: '127.0.0.1', API_KEYS: BENCH_KEY, LOG_LEVEL: logLevel },
    stdio: ['ignore', logFd, 'pipe']
  })
  fs.closeSync(logFd) // the child holds its own
  child.once('exit', () => { summarizeLog(logFile, port).catch(() => {}) })
  child.stderr!.pipe(process.stderr)
  // The start-up banner names the metrics listener's URL (METRICS_PORT=0: a free port).
  let banner = ''
  const metricsUrl = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no metrics URL in the start-up banner within 60 s')), 60_000).unref()
    const read = (c: Buffer) => {
      banner += c.toString()
      const m = /^ {2}metrics: (http:\/\/\S+\/metrics)\b/m.exec(banner)
      if (m !== null) { clearTimeout(timer); child.stderr!.off('data', read); resolve(m[1]!) }
    }
    child.stderr!.on('data', read)
  })
  metricsUrl.catch(() => {}) // awaited below, once the service answers
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
    metricsUrl: await metricsUrl, // the metrics listener starts just after the service port
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
