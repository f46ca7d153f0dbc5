/**
 * What scripts rely on: stdout carries only the result, and each kind of failure has its own
 * exit code (docs/cli.md). Also: --help per command, standard input, Retry-After honoured, and
 * an archive that tries to leave its directory refused on --extract.
 */
import fs from 'node:fs'
import path from 'node:path'
import { create } from 'tar'
import t from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { freePort } from '../helpers/ports.js'
import { startServer } from '../helpers/server-process.js'
import { startProxy } from './proxy.js'
import { cliEnv, runCli, stateFiles } from './run.js'

const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

t.test('--help for each command; usage errors exit 2', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  for (const cmd of ['upload', 'download', 'info', 'delete']) {
    const help = await runCli(t, [cmd, '--help'], { ...env, url: undefined })
    t.equal(help.status, 0)
    t.match(help.stdout, `Usage: dropcode ${cmd}`)
  }
  t.match((await runCli(t, ['--help'], env)).stdout, /Commands:/)
  for (const [args, message, noUrl] of [
    [['frobnicate'], /unknown command/],
    [['upload'], /needs a path/],
    [['upload', 'x', '--parallel', '0'], /--parallel must be a positive integer/],
    [['upload', 'x', '--chunk-size', 'lots'], /--chunk-size must be a size/],
    [['download', 'ABCDEF', '--bogus'], /Unknown option '--bogus'/],
    [['info', 'ab/../x'], /is not a download code/],
    [['info', 'ABCDEF'], /no service URL/, true]
  ] as Array<[string[], RegExp, boolean?]>) {
    const r = await runCli(t, args, noUrl === true ? { ...env, url: undefined } : env)
    t.equal(r.status, 2, args.join(' '))
    t.match(r.stderr, message)
    t.equal(r.stdout, '')
  }
  const noKey = await runCli(t, ['upload', 'x'], { ...env, key: undefined })
  t.equal(noKey.status, 2)
  t.match(noKey.stderr, /no API key/)
})

t.test('stdout is the code alone; exit codes 3, 4, 6 and 8', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'notes.txt'), 'hello\n')
  const up = await runCli(t, ['upload', 'notes.txt', '--max-downloads', '2'], env)
  t.equal(up.status, 0)
  t.match(up.stdout, /^[A-Za-z0-9]{6}\n$/)
  const code = up.stdout.trim()

  const auth = await runCli(t, ['upload', 'notes.txt', '--key', 'wrong'], env)
  t.equal(auth.status, 3, 'wrong key')
  t.equal(auth.stdout, '')
  t.match(auth.stderr, /401 DROPCODE_UNAUTHORIZED/)

  t.equal((await runCli(t, ['download', 'ZZZZZZ'], env)).status, 4, 'unknown code')
  t.equal((await runCli(t, ['info', 'ZZZZZZ'], env)).status, 4)
  t.equal((await runCli(t, ['delete', 'ZZZZZZ'], env)).status, 4)

  const closed = `http://127.0.0.1:${await freePort()}`
  const net = await runCli(t, ['info', code, '--url', closed, '--retries', '0'], env)
  t.equal(net.status, 6, 'nothing listening')
  t.match(net.stderr, /ECONNREFUSED/)

  const missing = await runCli(t, ['upload', 'no-such-file'], env)
  t.equal(missing.status, 8, 'unreadable input')

  const down = await runCli(t, ['download', code], env)
  t.equal(down.status, 8, 'notes.txt exists here')
  t.match(down.stderr, /exists: pass --force/)
  t.equal(fs.readFileSync(path.join(env.cwd, 'notes.txt'), 'utf8'), 'hello\n')
  const info = await runCli(t, ['info', code], env)
  t.match(info.stdout, /^name: notes\.txt\nsize: 6\n/, 'the refused download used nothing up (HEAD first)')
  const forced = await runCli(t, ['download', code, '--force', '--json'], env)
  t.equal(forced.status, 0, forced.stderr)
  t.match(JSON.parse(forced.stdout), { code, name: 'notes.txt', size: 6, path: path.join(env.cwd, 'notes.txt') })
})

t.test('standard input: one streamed upload, named with --name', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const up = await runCli(t, ['upload', '-', '--name', 'log.txt', '--json'], env, 'line one\nline two\n')
  t.equal(up.status, 0, up.stderr)
  const { code, size, name } = JSON.parse(up.stdout) as { code: string, size: number, name: string }
  t.same({ size, name }, { size: 18, name: 'log.txt' })
  const down = await runCli(t, ['download', code, '-o', '-'], env)
  t.equal(down.stdout, 'line one\nline two\n')
})

t.test('5xx with Retry-After: the CLI waits as told and retries', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'f.txt'), 'x')
  let refused = false
  proxy.decide = () => {
    if (refused) return { kind: 'pass' }
    refused = true
    return { kind: 'answer', status: 503, headers: { 'retry-after': '2', 'content-type': 'application/json' }, body: '{"error":"busy","code":"DROPCODE_BUSY"}' }
  }
  const up = await runCli(t, ['upload', 'f.txt'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(up.stderr, /503 DROPCODE_BUSY: busy; retrying in 2\.0 s/)
  t.same(proxy.seen.map(s => s.path), ['/upload', '/upload'])
  t.ok(up.ms >= 2000, `waited the Retry-After (${up.ms} ms)`)

  proxy.decide = () => ({ kind: 'answer', status: 502, body: 'bad gateway' })
  const down = await runCli(t, ['info', 'ABCDEF', '--retries', '1'], env)
  t.equal(down.status, 6, 'still 5xx after the retries')
  t.match(down.stderr, /after 2 attempts/)
})

t.test('the retry policy (api/retry.ts): a 500 is retried, a 507 is final', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'f.txt'), 'x')
  let failed = false
  proxy.decide = () => {
    if (failed) return { kind: 'pass' }
    failed = true
    return { kind: 'answer', status: 500, headers: { 'content-type': 'application/json' }, body: '{"error":"Internal server error.","code":"DROPCODE_INTERNAL","request_id":"r1"}' }
  }
  const up = await runCli(t, ['upload', 'f.txt'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(up.stderr, /500 DROPCODE_INTERNAL: Internal server error; retrying in/)
  t.same(proxy.seen.map(s => s.path), ['/upload', '/upload'])

  proxy.seen.length = 0
  proxy.decide = () => ({ kind: 'answer', status: 507, headers: { 'content-type': 'application/json' }, body: '{"error":"The service is out of storage space; try again later.","code":"DROPCODE_STORAGE_FULL"}' })
  const full = await runCli(t, ['upload', 'f.txt'], env)
  t.equal(full.status, 6, full.stderr)
  t.match(full.stderr, /507 DROPCODE_STORAGE_FULL/)
  t.notMatch(full.stderr, /retrying/)
  t.same(proxy.seen.map(s => s.path), ['/upload'], 'asked once')
})

t.test('--extract refuses entries that would leave the directory (exit 8)', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const src = path.join(env.cwd, 'src')
  fs.mkdirSync(path.join(src, 'pkg'), { recursive: true })
  fs.writeFileSync(path.join(src, 'pkg', 'ok.txt'), 'fine')
  fs.writeFileSync(path.join(env.cwd, 'evil.txt'), 'escaped')
  fs.symlinkSync('/etc', path.join(src, 'pkg', 'etc-link'))
  fs.symlinkSync('../../outside', path.join(src, 'pkg', 'up-link'))
  // preservePaths keeps "../evil.txt" in the archive, as a hostile tool would.
  await create({ cwd: src, file: path.join(env.cwd, 'hostile.tar'), preservePaths: true }, ['pkg/ok.txt', 'pkg/etc-link', 'pkg/up-link', '../evil.txt'])
  const up = await runCli(t, ['upload', 'hostile.tar', '-q'], env)
  t.equal(up.status, 0, up.stderr)

  const target = path.join(env.cwd, 'deep', 'target')
  const down = await runCli(t, ['download', up.stdout.trim(), '--extract', '-o', target], env)
  t.equal(down.status, 8, down.stderr)
  t.match(down.stderr, /unsafe archive: refused 3 entries, nothing was extracted/)
  t.match(down.stderr, /\n {2}pkg\/etc-link: absolute link target \/etc/)
  t.notOk(fs.existsSync(path.join(env.cwd, 'deep')), 'all or nothing: not even the safe entries, nor the directory made for them')
  t.notOk(fs.existsSync(path.join(env.cwd, 'deep', 'evil.txt')), 'nothing written above the target')
  t.same(stateFiles(env), [], 'and its resume state')
})
