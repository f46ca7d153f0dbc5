/**
 * Issue 19, "resume state is the user's own": the CLI resumed into whatever session a state file
 * under its predictable name named. Now state in a directory that is not the user's own, or that
 * group or others can write, is not used; and a state file is bound to the API key that wrote it
 * (its SHA-256, never the key). A run that may not resume starts a new session: /upload/start,
 * never /upload/verify of the planted one.
 */
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes } from '../helpers/streams.js'
import { type Proxy, startProxy } from './proxy.js'
import { type CliEnv, cliEnv, killUploadAfterChunks, runCli, stateFiles } from './run.js'

const MiB = 1024 * 1024
const OTHER_KEY = 'other-key-9876543210'
const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn', API_KEYS: `${API_KEY},${OTHER_KEY}` }))
const ARGS = ['upload', 'app.bin', '--chunk-size', '1M', '--parallel', '1']

/** A proxy, a 4 MiB input, and an upload killed after two chunks (its state left behind). */
async function interrupted (t: Test, key = API_KEY): Promise<{ proxy: Proxy, env: CliEnv }> {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, key)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), bytes(4 * MiB, 21))
  t.equal((await killUploadAfterChunks(t, proxy, ARGS, env, 2, 1)).signal, 'SIGKILL')
  t.equal(stateFiles(env).length, 1, 'the session is remembered')
  return { proxy, env }
}

/** Reruns the upload; it must open a new session and succeed. */
async function rerunWithoutResume (t: Test, proxy: Proxy, env: CliEnv, warning: RegExp) {
  const before = proxy.seen.length
  const again = await runCli(t, ARGS, env)
  t.equal(again.status, 0, again.stderr)
  t.match(again.stdout, /^[A-Za-z0-9]{6}\n$/)
  t.match(again.stderr, warning)
  const paths = proxy.seen.slice(before).map(s => s.path)
  t.ok(paths.includes('/upload/start'), 'a new session')
  t.notOk(paths.includes('/upload/verify'), 'the saved session is not resumed')
  t.notMatch(again.stderr, /resuming upload/)
}

t.test('state in a directory that group or others can write is not used', async t => {
  const { proxy, env } = await interrupted(t)
  const dir = path.join(env.cache, 'dropcode')
  fs.chmodSync(dir, 0o777)
  const [file] = stateFiles(env)
  await rerunWithoutResume(t, proxy, env, /warning: not using resume state in .*dropcode: group or others can write it \(mode 0777\); this transfer cannot be resumed/)
  t.same(stateFiles(env), [file], 'nothing read, removed or written there')
})

t.test('state in a directory owned by another user is not used', async t => {
  const { proxy, env } = await interrupted(t)
  t.equal(process.getuid?.(), 0, 'these tests run as root, which can give a directory away')
  fs.chownSync(path.join(env.cache, 'dropcode'), 65534, 65534)
  await rerunWithoutResume(t, proxy, env, /warning: not using resume state in .*dropcode: it belongs to uid 65534, not to this user \(uid 0\)/)
})

t.test('state reached through a symbolic link is not used', async t => {
  const { proxy, env } = await interrupted(t)
  const dir = path.join(env.cache, 'dropcode')
  fs.renameSync(dir, `${dir}-real`)
  fs.symlinkSync(`${dir}-real`, dir)
  await rerunWithoutResume(t, proxy, env, /warning: not using resume state in .*dropcode: it is not a directory/)
})

t.test('a resume file belongs to the key that wrote it: another key starts its own session', async t => {
  const { proxy, env } = await interrupted(t)
  const [file] = stateFiles(env)
  const saved = fs.readFileSync(path.join(env.cache, 'dropcode', file!), 'utf8')
  t.notMatch(saved, API_KEY, 'the key itself is never stored')
  t.equal(JSON.parse(saved).keySha256, createHash('sha256').update('dropcode resume state key\0').update(API_KEY).digest('hex'), 'its SHA-256 is')

  await rerunWithoutResume(t, proxy, { ...env, key: OTHER_KEY }, /^/)
  t.ok(stateFiles(env).includes(file!), 'the first key\'s state is still there')
  const before = proxy.seen.length
  const own = await runCli(t, ARGS, env)
  t.equal(own.status, 0, own.stderr)
  t.match(own.stderr, /resuming upload: 2 of 4 chunks already sent/, 'and its own key still resumes it')
  t.same(proxy.seen.slice(before).map(s => s.path).filter(p => p !== '/upload/chunk'), ['/upload/verify', '/upload/complete'])
})

t.test('a resume file planted under another key\'s name is ignored', async t => {
  const { proxy, env } = await interrupted(t, OTHER_KEY)
  const [victims] = stateFiles(env)
  // The same input uploaded with API_KEY (the "attacker") and killed: its state, under its own name.
  const theirProxy = await startProxy(t, server.url)
  await killUploadAfterChunks(t, theirProxy, ARGS, { ...env, url: theirProxy.url, key: API_KEY }, 2, 1)
  const theirs = stateFiles(env).find(f => f !== victims)!
  t.ok(theirs !== undefined, 'the other run left its own state file')
  fs.copyFileSync(path.join(env.cache, 'dropcode', theirs), path.join(env.cache, 'dropcode', victims!))
  await rerunWithoutResume(t, proxy, env, /warning: ignoring resume state .*: it was written for another API key/)
})
