/**
 * Keeps the benchmark from rotting: runs its cheapest workload (small requests on the fs driver,
 * one round, --quick) as `npm run bench` would, and checks that it finishes and reports. It
 * asserts nothing about speed: the bench reports numbers, it does not judge them in tests.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { dataDir } from './helpers/tmp.js'

const root = path.resolve(import.meta.dirname, '..')

t.test('bench --quick --only small runs and writes its results', { timeout: 120_000 }, async t => {
  const out = path.join(dataDir(t), 'results.json')
  const child = spawn(process.execPath, ['--import=tsx', 'bench/run.ts', '--quick', '--only', 'small', '--drivers', 'fs', '--rounds', '1', '--out', out], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const [code] = await once(child, 'exit') as [number | null]
  t.equal(code, 0, `bench exit code (stderr: ${stderr.slice(-2000)})`)
  t.match(stdout, /\| 5 small requests \| dropcode fs: GET \/download of a missing code \(404\) \|/)
  const results = JSON.parse(readFileSync(out, 'utf8')) as {
    rows: Array<{ name: string, stat: { median: number } }>
    ratios: Array<{ name: string, value: number }>
    versions: { packages: Record<string, string> }
    failures: string[]
  }
  t.same(results.failures, [])
  t.equal(results.rows.length, 4, 'uploads, downloads, 404s, hello-world')
  for (const row of results.rows) t.ok(row.stat.median > 0, `${row.name}: a rate`)
  t.equal(results.ratios.length, 1)
  t.ok(Number.isFinite(results.ratios[0]!.value), 'the 404 ratio')
  t.equal(results.versions.packages.autocannon, '9.0.0')
})
