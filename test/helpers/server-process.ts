/**
 * The real entry point as a separate process (what `npm start` runs), for tests of crashes,
 * signals and restarts. The process is killed when the test ends, by its pid.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { Test } from 'tap'
import { until } from './until.js'

export const root = path.resolve(import.meta.dirname, '../..')

export interface ServerProcess {
  child: ChildProcess
  url: string
  /** Where the metrics listener answers (`http://127.0.0.1:PORT/metrics`); undefined with METRICS_PORT=off. */
  metricsUrl: string | undefined
  /** JSON log lines from stdout. */
  logs: Array<Record<string, unknown>>
  stderr: () => string
}

/**
 * Children still running when the test process exits without its teardown (a start-up step
 * that threw at the top level of a test file) are killed then, so no server outlives its test.
 */
const running = new Set<ChildProcess>()
process.once('exit', () => { for (const child of running) child.kill('SIGKILL') })

/** What `npm start` runs: the compiled entry point (`npm test` builds it first). */
export const serverCommand = (): [string, string[]] => [process.execPath, ['dist/server.js']]

export interface StartOptions {
  /** Preload test/fixtures/probe.mjs: `memoryAfterGc(server)` and `injectCrash(server)` then work. */
  probe?: boolean
}

/**
 * Starts the real entry point. Load shedding on event-loop delay is off unless `env` turns it
 * on: on a loaded CI machine a freshly started process can lag past the default second, and its
 * first answers would be 503 DROPCODE_BUSY (test/plugins/overload.test.ts tests shedding itself).
 * So is the guessing limit: every test client is 127.0.0.1, and tests look up missing codes on
 * purpose (test/plugins/rate-limit.test.ts tests the limit).
 * Both listeners take free ports (PORT=0, METRICS_PORT=0), so any number of servers run at once.
 */
export async function startServer (t: Test, env: Record<string, string>, options: StartOptions = {}): Promise<ServerProcess> {
  const [cmd, args] = serverCommand()
  const probe = options.probe === true ? ['--expose-gc', '--import', './test/fixtures/probe.mjs'] : []
  const child = spawn(cmd, [...probe, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', DRAIN_DELAY_SECONDS: '0', SHED_EVENT_LOOP_DELAY_MS: '0', RATE_LIMIT_FAILED_LOOKUPS: '0', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(probe.length > 0 ? ['ipc' as const] : [])]
  })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  running.add(child)
  child.once('exit', () => running.delete(child))
  const logs: Array<Record<string, unknown>> = []
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
  // The start-up banner (stderr, whatever LOG_LEVEL is) names the URLs once the server listens.
  const [url, metricsUrl] = await new Promise<[string, string | undefined]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 20 s: ${stderr}`)), 20_000)
    child.stderr!.on('data', () => {
      const m = /^ {2}(http:\/\/127\.0\.0\.1:\d+)\/$/m.exec(stderr)
      const metrics = /^ {2}metrics: (off|http:\/\/\S+\/metrics)\b/m.exec(stderr)
      if (m && metrics) { clearTimeout(timer); resolve([m[1]!, metrics[1] === 'off' ? undefined : metrics[1]]) }
    })
    createInterface({ input: child.stdout! }).on('line', line => {
      try { logs.push(JSON.parse(line) as Record<string, unknown>) } catch { /* not a log line */ }
    })
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`server exited with ${code}: ${stderr}`)) })
  })
  return { child, url, metricsUrl, logs, stderr: () => stderr }
}

/**
 * Whether a log line matching `match` came within `ms`: lines leave the server in batches, at
 * most LOG_FLUSH_MS after they are written (src/logging.ts), not with the answer.
 */
export async function logged (server: ServerProcess, match: (line: Record<string, unknown>) => boolean, ms = 5000): Promise<boolean> {
  return await until(() => server.logs.some(match), ms, 'a log line', 25).then(() => true, () => false)
}

/** Resolves with the process's exit code; kills it and resolves 'hung' if it has not exited within `ms`. */
export async function exitOf (child: ChildProcess, ms = 20_000): Promise<number | string> {
  if (child.exitCode !== null) return child.exitCode
  const timer = setTimeout(() => child.kill('SIGKILL'), ms)
  const [code, signal] = await once(child, 'exit') as [number | null, string | null]
  clearTimeout(timer)
  return code ?? (signal === 'SIGKILL' ? 'hung' : `signal ${String(signal)}`)
}

/**
 * Runs the real entry point to its exit, for starts that must fail: its exit code (or 'hung',
 * see exitOf) and what it wrote.
 */
export async function runToExit (env: Record<string, string>): Promise<{ code: number | string, stdout: string, stderr: string }> {
  const [cmd, args] = serverCommand()
  const child = spawn(cmd, args, { cwd: root, env: { PATH: process.env.PATH, HOST: '127.0.0.1', METRICS_PORT: '0', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const closed = once(child, 'close') // after 'exit', once stdout and stderr are read to the end
  let [stdout, stderr] = ['', '']
  child.stdout!.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
  const code = await exitOf(child)
  await closed
  return { code, stdout, stderr }
}

/** The server's memory after a full garbage collection (needs `probe`). */
export async function memoryAfterGc (server: ServerProcess): Promise<NodeJS.MemoryUsage> {
  const answer = once(server.child, 'message') as Promise<[NodeJS.MemoryUsage]>
  server.child.send('memory')
  return (await answer)[0]
}

/** Makes the server throw an exception nothing catches, as a bug of ours would (needs `probe`). */
export function injectCrash (server: ServerProcess): void {
  server.child.send('throw')
}

/** SIGTERM; resolves with the exit code, or a description of what went wrong (for the diff). */
export async function stopServer (server: ServerProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | string> {
  if (server.child.exitCode !== null) return server.child.exitCode
  const exited = once(server.child, 'exit')
  server.child.kill(signal)
  const [code, sig] = await exited as [number | null, string | null]
  if (code === 0) return 0
  const tail = server.logs.slice(-5).map(l => JSON.stringify(l)).join('\n')
  return `exit ${String(code)} signal ${String(sig)}\nstderr: ${server.stderr().slice(-2000)}\nlast logs:\n${tail}`
}

/** kill -9: no cleanup of any kind runs. */
export async function killServer (server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  const exited = once(server.child, 'exit')
  server.child.kill('SIGKILL')
  await exited
}
