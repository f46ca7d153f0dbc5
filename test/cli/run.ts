/**
 * The compiled CLI (`dist/cli/index.js`, built before every tap run: test/helpers/build.ts) as a child process,
 * with a private cache directory and only the environment a test gives it.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import type { Test } from 'tap'
import { root } from '../helpers/server-process.js'
import { dataDir } from '../helpers/tmp.js'
import type { Proxy } from './proxy.js'
import { until } from '../helpers/until.js'

export const CLI = path.join(root, 'dist/cli/index.js')

export interface CliResult {
  status: number | null
  signal: NodeJS.Signals | null
  stdout: string
  /** stdout as bytes (for -o -). */
  stdoutBytes: Buffer
  stderr: string
  /** ms from start to exit. */
  ms: number
}

export interface CliEnv {
  /** DROPCODE_URL */
  url?: string
  /** DROPCODE_KEY */
  key?: string
  /** Working directory (default: a fresh one). */
  cwd: string
  /** XDG_CACHE_HOME: keep it between runs that should resume. */
  cache: string
}

export function cliEnv (t: Test, url: string, key?: string): CliEnv {
  return { url, key, cwd: dataDir(t), cache: dataDir(t) }
}

export interface Running { child: ChildProcess, done: Promise<CliResult> }

export function startCli (t: Test, args: string[], env: CliEnv, stdin?: Buffer | string): Running {
  const started = Date.now()
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: env.cwd,
    env: {
      PATH: process.env.PATH,
      HOME: env.cache,
      XDG_CACHE_HOME: env.cache,
      ...(env.url !== undefined ? { DROPCODE_URL: env.url } : {}),
      ...(env.key !== undefined ? { DROPCODE_KEY: env.key } : {})
    },
    stdio: ['pipe', 'pipe', 'pipe']
  })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  const stdout: Buffer[] = []
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => { stdout.push(c) })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  child.stdin.on('error', () => {})
  child.stdin.end(stdin)
  const done = new Promise<CliResult>(resolve => child.once('close', (status, signal) => resolve({ status, signal, stdout: Buffer.concat(stdout).toString(), stdoutBytes: Buffer.concat(stdout), stderr, ms: Date.now() - started })))
  return { child, done }
}

export const runCli = (t: Test, args: string[], env: CliEnv, stdin?: Buffer | string) => startCli(t, args, env, stdin).done

export const fileSize = (p: string) => { try { return fs.statSync(p).size } catch { return -1 } }

/** Files left in the CLI's resume-state directory. */
export const stateFiles = (env: CliEnv) => { try { return fs.readdirSync(path.join(env.cache, 'dropcode')) } catch { return [] } }

/**
 * Runs `dropcode upload` until `stored` chunks are stored and the next `held` chunk requests
 * are held by the proxy, then kills it (kill -9); the proxy passes everything again afterwards.
 */
export async function killUploadAfterChunks (t: Test, proxy: Proxy, args: string[], env: CliEnv, stored: number, held: number) {
  let chunks = 0
  proxy.decide = req => req.url === '/upload/chunk' && ++chunks > stored ? { kind: 'hold' } : { kind: 'pass' }
  const first = startCli(t, args, env)
  await until(() => proxy.seen.filter(s => s.path === '/upload/chunk' && s.status === 200 && s.done).length === stored && chunks === stored + held, 20_000, `${stored} chunks stored, ${held} held`)
  first.child.kill('SIGKILL')
  const done = await first.done
  proxy.decide = () => ({ kind: 'pass' })
  return done
}
