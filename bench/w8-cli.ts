/**
 * Workload 8: the `dropcode` command line against curl, on the same service process, the same
 * file on disk and the same machine (issue 21: "the CLI as fast as curl"). Each side is a child
 * process timed from spawn to exit; rounds alternate.
 *
 * - upload of the large file: `dropcode upload FILE` (its defaults: a chunked, resumable session
 *   with every chunk's and the file's SHA-256) against one `curl -F file=@FILE` POST /upload
 *   (no digest, not resumable);
 * - download: `dropcode download CODE -o FILE` (HEAD, GET, SHA-256 checked, rename) against
 *   `curl -o FILE` of the same code;
 * - a directory (3,000 small files and one 400 MiB file; --quick: 100 MiB): `dropcode upload DIR`
 *   against `tar -c | curl -F file=@-`, and `dropcode download CODE --extract` against
 *   `curl | tar -x`.
 *
 * Bars: ≥ 0.90 of curl's rate each (dropcode's median MiB/s over curl's).
 * Env: BENCH_CLI_ARGS adds options to every `dropcode upload` (e.g. '--chunk-size 32M --parallel 2').
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { startService, tempDir, type Driver } from './backends.js'
import { addRow, alternate, type Context, log, MiB, mibPerSecond, ratio, stat, timed } from './lib.js'
import { BENCH_KEY } from './server-process.js'

const ROOT = path.resolve(import.meta.dirname, '..')
const CLI = path.join(ROOT, 'dist/cli/index.js')
const SMALL_FILES = 3000
const extraArgs = (process.env.BENCH_CLI_ARGS ?? '').split(' ').filter(a => a !== '')

/** Runs `cmd` (a shell line when `shell`), resolving with its stdout; rejects on a non-zero exit. */
function run (cmd: string, args: string[], env: NodeJS.ProcessEnv = {}, shell = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, stdio: ['ignore', 'pipe', 'pipe'], shell })
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => { out += c.toString() })
    child.stderr.on('data', (c: Buffer) => { err += c.toString() })
    child.on('error', reject)
    child.on('close', code => code === 0 ? resolve(out) : reject(new Error(`${shell ? cmd : [cmd, ...args].join(' ')} exited ${code}: ${err.slice(0, 500)}`)))
  })
}

const codeOf = (json: string) => {
  const code = (JSON.parse(json) as { code?: string }).code
  if (typeof code !== 'string') throw new Error(`no code in ${json.slice(0, 200)}`)
  return code
}

async function writeRandom (file: string, size: number): Promise<void> {
  const fh = await fs.open(file, 'w')
  try {
    for (let at = 0; at < size; at += 8 * MiB) await fh.write(randomBytes(Math.min(8 * MiB, size - at)))
  } finally {
    await fh.close()
  }
}

/** `dir/tree`: SMALL_FILES files of 100 B–8 KiB in 30 directories, and one `big` file. */
async function makeTree (dir: string, bigBytes: number): Promise<{ root: string, bytes: number }> {
  const root = path.join(dir, 'tree')
  let bytes = bigBytes
  for (let i = 0; i < SMALL_FILES; i++) {
    const sub = path.join(root, 'small', `d${String(i % 30).padStart(2, '0')}`)
    if (i < 30) await fs.mkdir(sub, { recursive: true })
    const size = 100 + ((i * 7919) % 7900)
    bytes += size
    await fs.writeFile(path.join(sub, `f${String(i).padStart(4, '0')}.txt`), randomBytes(size))
  }
  await writeRandom(path.join(root, 'big.bin'), bigBytes)
  return { root, bytes }
}

export async function benchCli (ctx: Context, driver: Driver): Promise<void> {
  const workload = '8 cli vs curl'
  const size = ctx.largeMiB * MiB
  const server = await startService(driver)
  const dir = await tempDir('cli')
  const file = path.join(dir, 'big.bin')
  await writeRandom(file, size)
  const cache = path.join(dir, 'cache')
  const cliEnv = { DROPCODE_URL: server.url, DROPCODE_KEY: BENCH_KEY, XDG_CACHE_HOME: cache }
  const key = ['-H', `X-Client-Key: ${BENCH_KEY}`]
  const cli = (args: string[]) => run(process.execPath, [CLI, ...args], cliEnv)
  const remove = (code: string) => fetch(`${server.url}/delete/${code}`, { method: 'DELETE' }).then(r => r.arrayBuffer())
  const label = `${ctx.largeMiB} MiB`
  const pair = (name: string, ours: () => Promise<unknown>, theirs: () => Promise<unknown>, bytes: number, after?: () => Promise<void>) => {
    const side = (fn: () => Promise<unknown>) => async () => {
      const { seconds } = await timed(fn)
      await after?.()
      return mibPerSecond(bytes, seconds)
    }
    return alternate(ctx.rounds, [{ name: 'dropcode', warmUp: side(ours), run: side(ours) }, { name: 'curl', warmUp: side(theirs), run: side(theirs) }])
  }
  const record = (what: string, ours: string, theirs: string, samples: Map<string, number[]>) => {
    const a = addRow(ctx, { workload, name: `${driver}: ${ours}`, unit: 'MiB/s', stat: stat(samples.get('dropcode')!) })
    const b = addRow(ctx, { workload, name: `${driver}: ${theirs}`, unit: 'MiB/s', stat: stat(samples.get('curl')!) })
    ctx.ratios.push(ratio(workload, `${what} ${driver}: dropcode / curl`, a, b, 0.90))
  }

  try {
    // Upload: each side's file is deleted after it (the test radosgw keeps objects in RAM).
    const codes: string[] = []
    const up = await pair('upload',
      async () => codes.push(codeOf(await cli(['upload', file, '--json', '--quiet', ...extraArgs]))),
      async () => codes.push(codeOf(await run('curl', ['-sSf', ...key, '-F', `file=@${file}`, `${server.url}/upload`]))),
      size, async () => { await remove(codes.pop()!) })
    record(`upload ${label}`, `dropcode upload ${label}`, `curl -F file=@ POST /upload ${label}`, up)

    // Download: one stored copy, downloaded by both sides in turn.
    const code = codeOf(await run('curl', ['-sSf', ...key, '-F', 'max_downloads=1000', '-F', `file=@${file}`, `${server.url}/upload`]))
    const out = path.join(dir, 'out.bin')
    const down = await pair('download',
      () => cli(['download', code, '-o', out, '--force', '--quiet']),
      () => run('curl', ['-sSf', '-o', out, `${server.url}/download/${code}`]),
      size, () => fs.rm(out, { force: true }))
    record(`download ${label}`, `dropcode download -o ${label}`, `curl -o GET /download ${label}`, down)
    await remove(code)

    // A directory: many small files and one large one.
    const bigDirMiB = ctx.quick ? 100 : 400
    const tree = await makeTree(dir, bigDirMiB * MiB)
    log(`cli: directory of ${SMALL_FILES} small files and one ${bigDirMiB} MiB file, ${(tree.bytes / MiB).toFixed(0)} MiB of content`)
    const dirCodes: string[] = []
    const tarUp = `tar -cf - -C ${JSON.stringify(dir)} tree | curl -sSf -H 'X-Client-Key: ${BENCH_KEY}' -F 'max_downloads=1000' -F 'file=@-;filename=tree.tar' ${server.url}/upload`
    const dirUp = await pair('directory upload',
      async () => dirCodes.push(codeOf(await cli(['upload', tree.root, '--json', '--quiet', '--max-downloads', '1000', ...extraArgs]))),
      async () => dirCodes.push(codeOf(await run(tarUp, [], {}, true))),
      tree.bytes, async () => { await remove(dirCodes.pop()!) })
    const dirLabel = `${SMALL_FILES} files + ${bigDirMiB} MiB`
    record(`directory upload (${dirLabel})`, `dropcode upload DIR (${dirLabel})`, `tar -c | curl -F file=@- (${dirLabel})`, dirUp)

    const dirCode = codeOf(await run(tarUp, [], {}, true))
    const into = path.join(dir, 'extracted')
    const dirDown = await pair('directory download',
      () => cli(['download', dirCode, '--extract', '-o', into, '--quiet']),
      async () => { await fs.mkdir(into); await run(`curl -sSf ${server.url}/download/${dirCode} | tar -xf - -C ${JSON.stringify(into)}`, [], {}, true) },
      tree.bytes, () => fs.rm(into, { recursive: true, force: true }))
    record(`directory download (${dirLabel})`, `dropcode download --extract (${dirLabel})`, `curl | tar -x (${dirLabel})`, dirDown)
    await remove(dirCode)
  } finally {
    await server.stop()
  }
}
