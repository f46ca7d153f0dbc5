/**
 * `dropcode upload` against the same chunks sent with curl, 4 in flight each, on one service
 * process (fs+local). Run: `npm run build && node --import=tsx bench/cli.ts`.
 *
 * - CLI: `node dist/cli/index.js upload FILE --chunk-size 8M --parallel 4`, wall clock from
 *   spawn to exit: the chunks (read once, hashed in a worker as they go, chunk_sha256 after
 *   each) and /upload/complete with the file's sha256. Workload 8 of `npm run bench` compares
 *   the CLI with one `curl -F` POST instead.
 * - curl: the file split into 8 MiB part files beforehand (not timed), then /upload/start,
 *   one `curl -F chunk=@part` process per chunk with 4 running at once, /upload/complete:
 *   what the README's shell loop does, run in parallel, without any digest.
 *
 * Env: BENCH_SIZE_MIB (default 1024), BENCH_RUNS (default 3; the runs alternate), BENCH_PARALLEL (4).
 * Prints a Markdown table (best and median MiB/s of each) on stdout.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { BENCH_KEY, startServerProcess } from './server-process.js'

const MiB = 1024 * 1024
const SIZE = Number(process.env.BENCH_SIZE_MIB ?? 1024) * MiB
const RUNS = Number(process.env.BENCH_RUNS ?? 3)
const PARALLEL = Number(process.env.BENCH_PARALLEL ?? 4)
const CHUNK = 8 * MiB
const ROOT = path.resolve(import.meta.dirname, '..')

function run (cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (c: Buffer) => { out += c.toString() })
    child.on('error', reject)
    child.on('close', code => code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.slice(0, 3).join(' ')}… exited ${code}`)))
  })
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-bench-cli-'))
const server = await startServerProcess({ DATA_DIR: path.join(dir, 'data'), MAX_FILE_SIZE: String(SIZE + MiB), SWEEP_INTERVAL_SECONDS: '0' })
try {
  const file = path.join(dir, 'input.bin')
  const out = fs.openSync(file, 'w')
  for (let at = 0; at < SIZE; at += CHUNK) fs.writeSync(out, randomBytes(Math.min(CHUNK, SIZE - at)))
  fs.closeSync(out)
  const parts: string[] = []
  const data = fs.openSync(file, 'r')
  for (let i = 0; i * CHUNK < SIZE; i++) {
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, SIZE - i * CHUNK))
    fs.readSync(data, buf, 0, buf.length, i * CHUNK)
    parts.push(path.join(dir, `part.${String(i).padStart(5, '0')}`))
    fs.writeFileSync(parts[i]!, buf)
  }
  fs.closeSync(data)
  process.stderr.write(`${SIZE / MiB} MiB in ${parts.length} chunks of 8 MiB, ${PARALLEL} in flight, ${RUNS} runs each\n`)

  const cli = async () => {
    const t0 = performance.now()
    const code = await run(process.execPath, [path.join(ROOT, 'dist/cli/index.js'), 'upload', file, '--chunk-size', '8M', '--parallel', String(PARALLEL), '--quiet'],
      { PATH: process.env.PATH, HOME: dir, XDG_CACHE_HOME: path.join(dir, 'cache'), DROPCODE_URL: server.url, DROPCODE_KEY: BENCH_KEY })
    if (!/^[A-Za-z0-9]{6}\n$/.test(code)) throw new Error(`unexpected CLI output ${code}`)
    return performance.now() - t0
  }
  const curl = async () => {
    const key = ['-H', `X-Client-Key: ${BENCH_KEY}`]
    const t0 = performance.now()
    const start = JSON.parse(await run('curl', ['-sf', ...key, '-F', 'filename=input.bin', '-F', `total_chunks=${parts.length}`, `${server.url}/upload/start`])) as { upload_id: string }
    let next = 0
    await Promise.all(Array.from({ length: PARALLEL }, async () => {
      while (next < parts.length) {
        const i = next++
        await run('curl', ['-sf', '-o', '/dev/null', ...key, '-F', `upload_id=${start.upload_id}`, '-F', `chunk_index=${i}`, '-F', `chunk=@${parts[i]}`, `${server.url}/upload/chunk`])
      }
    }))
    const done = JSON.parse(await run('curl', ['-sf', ...key, '-F', `upload_id=${start.upload_id}`, `${server.url}/upload/complete`])) as { code: string }
    if (typeof done.code !== 'string') throw new Error('curl: no code')
    return performance.now() - t0
  }

  const results: Record<'cli' | 'curl', number[]> = { cli: [], curl: [] }
  for (let r = 0; r < RUNS; r++) {
    for (const [name, fn] of [['cli', cli], ['curl', curl]] as const) {
      const ms = await fn()
      results[name].push(SIZE / MiB / (ms / 1000))
      process.stderr.write(`run ${r + 1} ${name}: ${(ms / 1000).toFixed(2)} s, ${(SIZE / MiB / (ms / 1000)).toFixed(1)} MiB/s\n`)
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(`${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores, Node ${process.version}, fs+local, ${SIZE / MiB} MiB, 8 MiB chunks, ${PARALLEL} in flight, ${RUNS} runs\n`)
  console.log('| client | best MiB/s | median MiB/s |\n|---|---:|---:|')
  console.log(`| \`dropcode upload\` (one read: chunks with chunk_sha256, sha256 at complete) | ${Math.max(...results.cli).toFixed(1)} | ${median(results.cli).toFixed(1)} |`)
  console.log(`| curl, one process per chunk (no digests) | ${Math.max(...results.curl).toFixed(1)} | ${median(results.curl).toFixed(1)} |`)
} finally {
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
}
