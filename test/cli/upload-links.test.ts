/**
 * Issue 19: a directory with a link that leads out of it is refused on upload, before a byte
 * is sent (the proxy sees no request at all), naming the links; links inside still travel.
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { startProxy } from './proxy.js'
import { cliEnv, runCli } from './run.js'

const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

t.test('absolute and escaping links, also through another link, are refused before any byte is sent', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const site = path.join(env.cwd, 'site')
  fs.mkdirSync(path.join(site, 'a', 'b'), { recursive: true })
  fs.writeFileSync(path.join(site, 'index.html'), 'hi')
  fs.symlinkSync('index.html', path.join(site, 'home.html')) // inside: fine
  fs.symlinkSync('../..', path.join(site, 'a', 'b', 's')) // site itself: fine
  fs.symlinkSync('/etc', path.join(site, 'etc'))
  fs.symlinkSync('../../outside', path.join(site, 'a', 'up'))
  fs.symlinkSync('a/b/s/../secrets', path.join(site, 'through')) // "secrets" as text, ../secrets on disk
  const up = await runCli(t, ['upload', 'site'], env)
  t.equal(up.status, 8, up.stderr)
  t.match(up.stderr, /refusing to upload .*site: 3 entries lead out of it/)
  t.match(up.stderr, /\n {2}site\/etc: absolute link target \/etc/)
  t.match(up.stderr, /\n {2}site\/a\/up: link target \.\.\/\.\.\/outside leads outside the directory/)
  t.match(up.stderr, /\n {2}site\/through: link target a\/b\/s\/\.\.\/secrets leads outside the directory \(through the link a\/b\/s\)/)
  t.notMatch(up.stderr, /home\.html|a\/b\/s:/, 'links inside are not named')
  t.match(up.stderr, /tar -cf x\.tar -C .* site && dropcode upload x\.tar/, 'says how to send it anyway')
  t.equal(up.stdout, '')
  t.same(proxy.seen, [], 'no request was made')

  fs.rmSync(path.join(site, 'etc'))
  fs.rmSync(path.join(site, 'a', 'up'))
  fs.rmSync(path.join(site, 'through'))
  const fine = await runCli(t, ['upload', 'site'], env)
  t.equal(fine.status, 0, fine.stderr)
})

t.test('a FIFO in the directory is refused before any byte is sent', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const site = path.join(env.cwd, 'site')
  fs.mkdirSync(site)
  fs.writeFileSync(path.join(site, 'index.html'), 'hi')
  t.equal(spawnSync('mkfifo', [path.join(site, 'pipe')]).status, 0, 'mkfifo')
  const up = await runCli(t, ['upload', 'site'], env)
  t.equal(up.status, 8, up.stderr)
  t.match(up.stderr, /\n {2}site\/pipe: a FIFO, not a file, directory or link/)
  t.same(proxy.seen, [], 'no request was made')
})
