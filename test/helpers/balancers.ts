/**
 * Debian's real nginx and HAProxy in front of test instances, run from the repository's own
 * configuration files (deploy/nginx.conf, deploy/haproxy.cfg) with only what a test must change:
 * the instances' addresses (`dropcode-1:3000`, `dropcode-2:3000` in the files), the listen port,
 * and nginx's pid, log and temp paths. Each replacement must find its text, so a recipe that
 * drifts from what the tests expect fails here instead of testing something else. Both run in
 * the foreground as children of the test and are stopped by pid when it ends.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import type { Test } from 'tap'
import { freePort } from './ports.js'
import { root } from './server-process.js'
import { dataDir } from './tmp.js'

export interface Balancer {
  /** `http://127.0.0.1:PORT`, the balancer's own address. */
  url: string
  child: ChildProcess
  /** What the balancer wrote to stderr (and nginx to its error log). */
  errors (): string
}

/** The instances a configuration names, in order. */
const INSTANCES = ['dropcode-1:3000', 'dropcode-2:3000']

function replaceOnce (text: string, from: string | RegExp, to: string, file: string): string {
  const found = typeof from === 'string' ? text.includes(from) : from.test(text)
  if (!found) throw new Error(`${file} no longer contains ${String(from)}: update test/helpers/balancers.ts with the recipe`)
  return text.replace(from, to)
}

/** The configuration file with the test's instances (`host:port`) in place of the recipe's, wherever it names them. */
function withInstances (file: string, instances: string[]): string {
  let text = fs.readFileSync(path.resolve(root, file), 'utf8')
  INSTANCES.forEach((name, i) => {
    if (!text.includes(name)) throw new Error(`${file} no longer contains ${name}: update test/helpers/balancers.ts with the recipe`)
    text = text.split(name).join(instances[i] ?? instances[0]!)
  })
  return text
}

async function listening (port: number, child: ChildProcess, errors: () => string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (true) {
    if (child.exitCode !== null) throw new Error(`balancer exited with ${child.exitCode}: ${errors()}`)
    const ok = await new Promise<boolean>(resolve => {
      const socket = net.connect(port, '127.0.0.1')
      socket.once('connect', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`balancer did not listen on ${port}: ${errors()}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

/** SIGTERM (nginx's master then stops its workers itself), SIGKILL if it hangs. */
async function stop (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
  await exited
  clearTimeout(timer)
}

/** Balancers still running when the test process exits without its teardown: SIGTERM (nginx's master stops its workers). */
const running = new Set<ChildProcess>()
process.once('exit', () => { for (const child of running) child.kill('SIGTERM') })

async function run (t: Test, cmd: string, args: string[], port: number, logFile?: string): Promise<Balancer> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  running.add(child)
  child.once('exit', () => running.delete(child))
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
  child.on('error', err => { stderr += String(err) })
  t.teardown(() => stop(child))
  const errors = () => stderr + (logFile !== undefined && fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '')
  await listening(port, child, errors)
  return { url: `http://127.0.0.1:${port}`, child, errors }
}

/**
 * nginx from `file` (default: the recipe) in front of `instances` (`127.0.0.1:PORT`, one or two).
 * `configText` instead of a file runs a configuration written by the test (stock nginx), in which
 * `dropcode-1:3000` and `listen 80;` are replaced the same way.
 */
export async function startNginx (t: Test, instances: string[], opts: { file?: string, configText?: string } = {}): Promise<Balancer> {
  const dir = dataDir(t)
  const port = await freePort()
  const file = opts.file ?? 'deploy/nginx.conf'
  let text = opts.configText !== undefined ? opts.configText : withInstances(file, instances)
  if (opts.configText !== undefined) INSTANCES.forEach((name, i) => { if (text.includes(name)) text = text.replace(name, instances[i] ?? instances[0]!) })
  text = replaceOnce(text, /listen 80;/, `listen 127.0.0.1:${port};`, file)
  // Debian's nginx keeps its temp files under /var/lib/nginx; the test's own go under `dir`.
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(kind => `  ${kind}_temp_path ${dir}/${kind};\n`).join('')
  text = replaceOnce(text, /^http \{\n/m, `http {\n${temp}`, file)
  const conf = path.join(dir, 'nginx.conf')
  fs.writeFileSync(conf, text)
  const errorLog = path.join(dir, 'error.log')
  // As root, nginx's workers would run as nobody and could not write the test's temp files.
  const user = process.getuid?.() === 0 ? ' user root;' : ''
  return await run(t, 'nginx', ['-c', conf, '-p', dir, '-e', errorLog, '-g', `daemon off; pid ${dir}/nginx.pid; error_log ${errorLog} warn;${user}`], port, errorLog)
}

/** HAProxy from `file` (default: the recipe) in front of `instances` (`127.0.0.1:PORT`). */
export async function startHaproxy (t: Test, instances: string[], opts: { file?: string } = {}): Promise<Balancer> {
  const dir = dataDir(t)
  const port = await freePort()
  const file = opts.file ?? 'deploy/haproxy.cfg'
  const text = replaceOnce(withInstances(file, instances), 'bind :80', `bind 127.0.0.1:${port}`, file)
  const conf = path.join(dir, 'haproxy.cfg')
  fs.writeFileSync(conf, text)
  return await run(t, 'haproxy', ['-f', conf, '-db'], port)
}

export type BalancerKind = 'nginx' | 'haproxy'
export const startBalancer = async (t: Test, kind: BalancerKind, instances: string[]): Promise<Balancer> =>
  kind === 'nginx' ? await startNginx(t, instances) : await startHaproxy(t, instances)

/** Whether Debian's nginx and haproxy are installed (.ci/run installs them). */
export const balancersInstalled = (): boolean =>
  ['nginx', 'haproxy'].every(cmd => ['/usr/sbin', '/usr/bin'].some(dir => fs.existsSync(path.join(dir, cmd))))
