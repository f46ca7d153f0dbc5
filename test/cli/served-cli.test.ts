/**
 * The CLI as the service serves it (GET /cli/dropcode.mjs): installed the way a CI job would,
 * with curl, into an empty directory (no node_modules, no npm), and run with plain `node` (the
 * machine's: Node 20 in CI, the oldest a runner may have). It uploads a directory and downloads
 * it with --extract against the real service, byte-exact.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { curl } from '../helpers/curl.js'
import { dataDir } from '../helpers/tmp.js'
import { startServer } from '../helpers/server-process.js'

/**
 * Plain `node` in `cwd` with only `env` (through `env -i`: tap puts its own loader hooks into
 * the NODE_OPTIONS of every child it sees spawned, which would make the run anything but plain).
 */
/** The Node that runs the served file: the machine's own in CI (20, as on older runners; .ci/run). */
const NODE = process.env.DROPCODE_TEST_CLI_NODE ?? process.execPath

async function node (cwd: string, args: string[], env: Record<string, string>) {
  const vars = Object.entries({ PATH: process.env.PATH!, HOME: cwd, XDG_CACHE_HOME: cwd, ...env }).map(([k, v]) => `${k}=${v}`)
  const child = spawn('env', ['-i', ...vars, NODE, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let [stdout, stderr] = ['', '']
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const [status] = await once(child, 'close') as [number]
  return { status, stdout, stderr }
}

t.test('curl -fsSL $URL/cli/dropcode.mjs -o dropcode && node dropcode …: no npm, no node_modules', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'served-cli-key' })
  const bin = dataDir(t)
  const got = await curl(['-fsSL', '-D', '-', `${server.url}/cli/dropcode.mjs`, '-o', path.join(bin, 'dropcode')])
  t.equal(got.code, 0, got.stderr)
  const digest = /^repr-digest: sha-256=:([A-Za-z0-9+/=]+):/mi.exec(got.stdout)?.[1]
  const file = fs.readFileSync(path.join(bin, 'dropcode'))
  t.equal(digest, createHash('sha256').update(file).digest('base64'), 'Repr-Digest is the file\'s SHA-256')
  t.match(got.stdout, /^content-type: text\/javascript/mi)
  t.notOk(fs.existsSync(path.join(bin, 'node_modules')))
  const etag = /^etag: (".*")/mi.exec(got.stdout)?.[1]
  t.match(await curl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', `If-None-Match: ${etag!}`, `${server.url}/cli/dropcode.mjs`]), { stdout: '304' }, 'revalidated with its ETag')

  const env = { DROPCODE_URL: server.url, DROPCODE_KEY: 'served-cli-key' }
  const nodeVersion = await node(bin, ['--version'], {})
  t.comment(`the served CLI runs on Node ${nodeVersion.stdout.trim()}`)
  const version = await node(bin, ['dropcode', '--version'], env)
  t.equal(version.status, 0, version.stderr)
  t.match(version.stdout, /^dropcode \d+\.\d+\.\d+\n$/)
  t.equal(version.stderr, '', 'no warning of any kind (engines, experimental features)')

  const work = dataDir(t)
  fs.mkdirSync(path.join(work, 'dist/sub'), { recursive: true })
  fs.writeFileSync(path.join(work, 'dist/a.txt'), 'alpha')
  fs.writeFileSync(path.join(work, 'dist/sub/b.bin'), Buffer.alloc(300_000, 7))
  const up = await node(work, [path.join(bin, 'dropcode'), 'upload', 'dist', '--quiet'], env)
  t.equal(up.status, 0, up.stderr)
  const code = up.stdout.trim()
  t.match(code, /^[A-Za-z0-9]{6}$/)

  const elsewhere = dataDir(t)
  const down = await node(elsewhere, [path.join(bin, 'dropcode'), 'download', code, '--extract', '--quiet'], env)
  t.equal(down.status, 0, down.stderr)
  t.equal(fs.readFileSync(path.join(elsewhere, 'dist/a.txt'), 'utf8'), 'alpha')
  t.same(fs.readFileSync(path.join(elsewhere, 'dist/sub/b.bin')), Buffer.alloc(300_000, 7))
  t.equal(up.stderr + down.stderr, '', 'nothing on stderr with --quiet: no warnings')
})
