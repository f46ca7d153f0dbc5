/**
 * `download --extract` unpacks while it downloads (src/cli/extract.ts): a staging directory
 * fills as the archive's bytes arrive, and only a verified archive's tree is moved into place.
 * Driven by the real CLI through a proxy that stops, cuts or alters the download, and by kill -9.
 * (What an extraction refuses: extract-safety.test.ts.)
 */
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes } from '../helpers/streams.js'
import { cutAfter, flipAt, PAST_SOCKET_BUFFERS, startProxy, stopAfter } from './proxy.js'
import { cliEnv, fileSize, runCli, startCli, stateFiles } from './run.js'
import { until } from '../helpers/until.js'

const MiB = 1024 * 1024
const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

/** `site/` (a.bin 2 MiB, b/c.bin PAST_SOCKET_BUFFERS, index.html) uploaded as a directory through a fresh proxy. */
async function uploaded (t: Test, url: string, maxDownloads = 1) {
  const proxy = await startProxy(t, url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const site = path.join(env.cwd, 'site')
  fs.mkdirSync(path.join(site, 'b'), { recursive: true })
  fs.writeFileSync(path.join(site, 'a.bin'), bytes(2 * MiB, 41))
  fs.writeFileSync(path.join(site, 'b', 'c.bin'), bytes(PAST_SOCKET_BUFFERS, 42))
  fs.writeFileSync(path.join(site, 'index.html'), '<h1>hi</h1>')
  const up = await runCli(t, ['upload', 'site', '--max-downloads', String(maxDownloads), '-q'], env)
  t.equal(up.status, 0, up.stderr)
  return { proxy, env, site, code: up.stdout.trim() }
}

/** The extracted tree under `out` is `site`'s. */
function sameTree (t: Test, site: string, out: string) {
  t.same(fs.readFileSync(path.join(out, 'site', 'a.bin')), fs.readFileSync(path.join(site, 'a.bin')), 'a.bin')
  t.same(fs.readFileSync(path.join(out, 'site', 'b', 'c.bin')), fs.readFileSync(path.join(site, 'b', 'c.bin')), 'b/c.bin')
  t.equal(fs.readFileSync(path.join(out, 'site', 'index.html'), 'utf8'), '<h1>hi</h1>')
}

t.test('unpacked while it downloads; killed, the rerun resumes the archive, unpacks it whole, and leaves nothing else', async t => {
  const { proxy, env, site, code } = await uploaded(t, server.url)
  const out = path.join(env.cwd, 'out')
  const stage = path.join(env.cwd, '.out.site.tar.dropcode-extract')
  // The body stops after 3 MiB (the connection stays open): a.bin is whole by then.
  proxy.decide = req => req.method === 'GET' ? { kind: 'alter', response: () => stopAfter(3 * MiB) } : { kind: 'pass' }
  const first = startCli(t, ['download', code, '--extract', '-o', out], env)
  await until(() => fileSize(path.join(stage, 'site', 'a.bin')) === 2 * MiB, 20_000, 'a.bin unpacked before the download ended')
  await until(() => fileSize(path.join(env.cwd, '.out.site.tar.dropcode-part')) === 3 * MiB, 20_000, 'the 3 MiB in the partial archive')
  t.notOk(fs.existsSync(out), 'nothing in place before the archive is verified')
  first.child.kill('SIGKILL')
  await first.done

  proxy.decide = () => ({ kind: 'pass' })
  const second = await runCli(t, ['download', code, '--extract', '-o', out], env)
  t.equal(second.status, 0, second.stderr)
  t.match(second.stderr, /resuming download at 3145728 of/)
  t.equal(proxy.seen.filter(s => s.method === 'GET' && s.path.startsWith('/download/')).at(-1)?.status, 206, 'the claim resumed: no second download counted')
  sameTree(t, site, out)
  t.same(fs.readdirSync(env.cwd).sort(), ['out', 'site'], 'no staging directory or partial archive left, the killed run\'s included')
  t.same(stateFiles(env), [])
})

t.test('a connection cut midway is resumed, the unpacking goes on where it was', async t => {
  const { proxy, env, site, code } = await uploaded(t, server.url)
  let gets = 0
  proxy.decide = req => req.method === 'GET' && ++gets === 1 ? { kind: 'alter', response: () => cutAfter(5 * MiB) } : { kind: 'pass' }
  const work = path.join(env.cwd, 'work')
  fs.mkdirSync(work)
  const down = await runCli(t, ['download', code, '--extract'], { ...env, cwd: work })
  t.equal(down.status, 0, down.stderr)
  t.match(down.stderr, /download cut at \d+ of \d+ bytes.*; resuming/)
  t.same(proxy.seen.filter(s => s.method === 'GET' && s.path.startsWith('/download/')).map(s => s.status), [200, 206])
  sameTree(t, site, work)
  t.same(fs.readdirSync(work), ['site'], 'staged inside the current directory, then moved: nothing else left')
})

t.test('an archive that fails its digest: exit 5, and what was unpacked from it is gone', async t => {
  const { proxy, env, code } = await uploaded(t, server.url)
  // A byte inside b/c.bin's content, after a.bin was unpacked.
  proxy.decide = req => req.method === 'GET' ? { kind: 'alter', response: () => flipAt(5 * MiB) } : { kind: 'pass' }
  const out = path.join(env.cwd, 'out')
  const down = await runCli(t, ['download', code, '--extract', '-o', out], env)
  t.equal(down.status, 5, down.stderr)
  t.match(down.stderr, /integrity check failed/)
  t.same(fs.readdirSync(env.cwd).sort(), ['site'], 'no tree, no staging directory, no partial archive')
  t.same(stateFiles(env), [])
})

t.test('a resume the service no longer honours starts the archive over, and its unpacking with it', async t => {
  const noResume = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn', DOWNLOAD_RESUME_SECONDS: '0' }))
  const { proxy, env, site, code } = await uploaded(t, noResume.url, 2)
  let gets = 0
  proxy.decide = req => req.method === 'GET' && ++gets === 1 ? { kind: 'alter', response: () => cutAfter(5 * MiB) } : { kind: 'pass' }
  const out = path.join(env.cwd, 'out')
  const down = await runCli(t, ['download', code, '--extract', '-o', out], env)
  t.equal(down.status, 0, down.stderr)
  t.match(down.stderr, /could not resume the download .*starting again/)
  t.same(proxy.seen.filter(s => s.method === 'GET' && s.path.startsWith('/download/')).map(s => s.status), [200, 200], 'the second GET counted a new download')
  sameTree(t, site, out)
  t.same(fs.readdirSync(env.cwd).sort(), ['out', 'site'])
})
