/**
 * The GitHub Action's steps (action/run.sh, what action.yml runs), run directly as a runner
 * would run them (GitHub's runners are not available here): against a real service, it installs
 * the served CLI, uploads a directory (outputs code, url, sha256), downloads and unpacks it
 * elsewhere, and fails the step with the CLI's exit code on an unknown code and on bytes damaged
 * on the way (a proxy flips one).
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { flipAt, startProxy } from './cli/proxy.js'
import { root, startServer } from './helpers/server-process.js'
import { dataDir } from './helpers/tmp.js'

const KEY = 'action-key-0123456789'

/** Runs action/run.sh in `cwd` with the action's environment; its outputs parsed. */
async function action (t: Test, cwd: string, env: Record<string, string>) {
  const outputs = path.join(dataDir(t), 'github-output')
  fs.writeFileSync(outputs, '')
  const run = await new Promise<{ code: number, stderr: string }>(resolve => {
    // `env -i`: only what a runner's step gets (tap would put its loader hooks into NODE_OPTIONS).
    const vars = Object.entries({ PATH: process.env.PATH!, HOME: cwd, RUNNER_TEMP: dataDir(t), GITHUB_OUTPUT: outputs, ...env }).map(([k, v]) => `${k}=${v}`)
    execFile('env', ['-i', ...vars, 'bash', path.join(root, 'action/run.sh')], { cwd }, (err, _stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stderr })
    })
  })
  const out = Object.fromEntries(fs.readFileSync(outputs, 'utf8').split('\n').filter(l => l !== '').map(l => l.split(/=(.*)/s).slice(0, 2) as [string, string]))
  return { ...run, outputs: out }
}

t.test('upload: outputs code, url and sha256; download elsewhere: the same tree, verified', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const work = dataDir(t)
  fs.mkdirSync(path.join(work, 'dist/bin'), { recursive: true })
  fs.writeFileSync(path.join(work, 'dist/index.html'), '<h1>hi</h1>')
  fs.writeFileSync(path.join(work, 'dist/bin/run'), '#!/bin/sh\necho ok\n', { mode: 0o755 })
  fs.symlinkSync('../index.html', path.join(work, 'dist/bin/link'))

  const up = await action(t, work, { DROPCODE_URL: `${server.url}/`, DROPCODE_KEY: KEY, INPUT_UPLOAD: 'dist', INPUT_MAX_DOWNLOADS: '2' })
  t.equal(up.code, 0, up.stderr)
  t.match(up.outputs, { code: /^[A-Za-z0-9]{6}$/, sha256: /^[0-9a-f]{64}$/ })
  t.equal(up.outputs.url, `${server.url}/d/${up.outputs.code!}`, 'the code\'s page (the trailing / of the url input dropped)')

  const elsewhere = dataDir(t)
  const down = await action(t, elsewhere, { DROPCODE_URL: server.url, INPUT_DOWNLOAD: up.outputs.code!, INPUT_PATH: 'artifact' })
  t.equal(down.code, 0, down.stderr)
  t.same(down.outputs, up.outputs, 'the same code, page and SHA-256 on both ends')
  t.equal(fs.readFileSync(path.join(elsewhere, 'artifact/dist/index.html'), 'utf8'), '<h1>hi</h1>')
  t.equal(fs.statSync(path.join(elsewhere, 'artifact/dist/bin/run')).mode & 0o777, 0o755, 'permissions kept')
  t.equal(fs.readlinkSync(path.join(elsewhere, 'artifact/dist/bin/link')), '../index.html', 'links kept')
  t.notOk(fs.readdirSync(elsewhere).some(f => f.endsWith('.mjs')), 'the CLI was not left in the workspace')
})

t.test('the step fails with the CLI\'s exit code: an unknown code (4), damaged bytes (5), bad inputs (2)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const work = dataDir(t)
  t.match(await action(t, work, { DROPCODE_URL: server.url, INPUT_DOWNLOAD: 'AbCdEf' }), { code: 4, outputs: {} })
  t.match(await action(t, work, { DROPCODE_URL: server.url }), { code: 2, stderr: /give upload \(a path\) or download \(a code\)/ })
  t.match(await action(t, work, { DROPCODE_URL: server.url, INPUT_UPLOAD: 'x' }), { code: 2, stderr: /takes an API key/ })

  fs.writeFileSync(path.join(work, 'big.bin'), Buffer.alloc(3 * 1024 * 1024, 1))
  const up = await action(t, work, { DROPCODE_URL: server.url, DROPCODE_KEY: KEY, INPUT_UPLOAD: 'big.bin', INPUT_MAX_DOWNLOADS: '5' })
  t.equal(up.code, 0, up.stderr)
  const proxy = await startProxy(t, server.url)
  proxy.decide = req => req.method === 'GET' && req.url!.startsWith('/download/') ? { kind: 'alter', response: () => flipAt(2 * 1024 * 1024 + 17) } : { kind: 'pass' }
  const damaged = await action(t, dataDir(t), { DROPCODE_URL: proxy.url, INPUT_DOWNLOAD: up.outputs.code! })
  t.equal(damaged.code, 5, `a digest mismatch fails the step: ${damaged.stderr}`)
  t.same(damaged.outputs, {}, 'and outputs nothing')
})

t.test('action.yml: a composite action whose one step runs action/run.sh with every input', async t => {
  const { parse } = await import('yaml')
  const action = parse(fs.readFileSync(path.join(root, 'action.yml'), 'utf8')) as {
    inputs: Record<string, unknown>, outputs: Record<string, { value: string }>, runs: { using: string, steps: Array<{ run: string, shell: string, env: Record<string, string> }> }
  }
  t.equal(action.runs.using, 'composite')
  const [step] = action.runs.steps
  t.equal(step!.shell, 'bash')
  t.match(step!.run, '"$GITHUB_ACTION_PATH/action/run.sh"')
  const passed = Object.values(step!.env).map(v => /^\$\{\{ inputs\.([\w-]+) \}\}$/.exec(v)?.[1])
  t.same(passed.sort(), Object.keys(action.inputs).sort(), 'each input reaches the script')
  t.same(Object.keys(action.outputs).sort(), ['code', 'sha256', 'url'])
  t.ok((fs.statSync(path.join(root, 'action/run.sh')).mode & 0o111) !== 0, 'the script is executable')
})
