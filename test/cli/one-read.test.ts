/**
 * A fresh chunked upload reads its input once (issue 21): it declares `chunk_size` at start,
 * hashes the chunks while they are sent, and sends the file's `sha256` with /upload/complete,
 * where the service checks it before publishing anything. Seen through a proxy that records the
 * requests' bodies, and one that changes the digest on its way to the service.
 */
import fs from 'node:fs'
import path from 'node:path'
import { Transform, type TransformCallback } from 'node:stream'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { record, startProxy } from './proxy.js'
import { cliEnv, runCli, stateFiles } from './run.js'

const MiB = 1024 * 1024
const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

/** A multipart field's value in a recorded body. */
const field = (body: string, name: string) => new RegExp(`name="${name}"\\r\\n\\r\\n([^\\r]*)\\r\\n`).exec(body)?.[1]

/** Replaces every 64-hex-digit run in a (small) body with another of the same length. */
function otherDigest (): Transform {
  const parts: Buffer[] = []
  return new Transform({
    transform (chunk: Buffer, _enc, done: TransformCallback) { parts.push(chunk); done() },
    flush (done) { done(null, Buffer.from(Buffer.concat(parts).toString('latin1').replace(/[0-9a-f]{64}/g, '0'.repeat(64)), 'latin1')) }
  })
}

t.test('a chunked upload declares chunk_size and sends the file\'s sha256 with complete, not with start', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const data = bytes(5 * MiB + 123, 31)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), data)
  const bodies = new Map<string, Buffer[]>()
  proxy.decide = req => {
    if (req.url !== '/upload/start' && req.url !== '/upload/complete') return { kind: 'pass' }
    const into: Buffer[] = []
    bodies.set(req.url, into)
    return { kind: 'alter', request: () => record(into) }
  }
  const up = await runCli(t, ['upload', 'app.bin', '--chunk-size', '1M', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(JSON.parse(up.stdout), { size: data.length, sha256: sha256Of(data) })
  const start = Buffer.concat(bodies.get('/upload/start')!).toString()
  const complete = Buffer.concat(bodies.get('/upload/complete')!).toString()
  t.equal(field(start, 'chunk_size'), String(MiB), 'chunk_size declared')
  t.equal(field(start, 'total_chunks'), '6')
  t.equal(field(start, 'sha256'), undefined, 'no digest at start: nothing was read before the first chunk')
  t.equal(field(complete, 'sha256'), sha256Of(data), 'the file\'s digest goes with complete')
  // The hint is asked beside the start, in either order.
  t.same(proxy.seen.map(s => s.path).filter(p => p !== '/upload/chunk').sort(), ['/limits', '/upload/complete', '/upload/start'], 'start, the hint for chunks in flight, complete')
  t.equal(proxy.seen.at(-1)?.path, '/upload/complete', 'complete last')
  t.equal(proxy.seen.filter(s => s.path === '/upload/chunk' && s.status === 200).length, 6)

  const down = await runCli(t, ['download', JSON.parse(up.stdout).code, '-o', '-', '-q'], env)
  t.equal(sha256Of(down.stdoutBytes), sha256Of(data))
})

t.test('a digest at complete that is not the stored file\'s: exit 5, nothing published, no state left', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), bytes(3 * MiB + 7, 32))
  proxy.decide = req => req.url === '/upload/complete' ? { kind: 'alter', request: otherDigest } : { kind: 'pass' }
  const up = await runCli(t, ['upload', 'app.bin', '--chunk-size', '1M'], env)
  t.equal(up.status, 5, 'the integrity exit code')
  t.match(up.stderr, /DROPCODE_DIGEST_MISMATCH/)
  t.equal(up.stdout, '', 'no code printed')
  t.same(stateFiles(env), [], 'the closed session is forgotten')
  t.same(proxy.seen.filter(s => s.path === '/upload/complete').map(s => s.status), [400], 'refused once, not retried')
})

/** A proxy to the service, a CLI environment, and `site/` in it: index.html and 3 MiB of `seed` in assets/big.bin. */
async function siteTest (t: Test, seed: number) {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const dir = path.join(env.cwd, 'site')
  fs.mkdirSync(path.join(dir, 'assets'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'index.html'), '<h1>hi</h1>')
  fs.writeFileSync(path.join(dir, 'assets', 'big.bin'), bytes(3 * MiB, seed))
  return { proxy, env, dir }
}

t.test('a directory is counted from its metadata, then sent once with its digest at complete', async t => {
  const { proxy, env } = await siteTest(t, 33)
  const bodies: Buffer[] = []
  proxy.decide = req => req.url === '/upload/complete' ? { kind: 'alter', request: () => record(bodies) } : { kind: 'pass' }
  const up = await runCli(t, ['upload', 'site', '--chunk-size', '1M', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  const answer = JSON.parse(up.stdout) as { code: string, sha256: string }
  t.equal(field(Buffer.concat(bodies).toString(), 'sha256'), answer.sha256)

  const out = path.join(env.cwd, 'out')
  const down = await runCli(t, ['download', answer.code, '--extract', '-o', out, '-q'], env)
  t.equal(down.status, 0, down.stderr)
  t.equal(sha256Of(fs.readFileSync(path.join(out, 'site', 'assets', 'big.bin'))), sha256Of(bytes(3 * MiB, 33)))
})

t.test('a directory that changes after it was counted is measured and sent again, in a new session', async t => {
  const { proxy, env, dir } = await siteTest(t, 34)
  const grown = `<h1>${'x'.repeat(5000)}</h1>`
  let starts = 0
  proxy.decide = req => {
    // Counted already, not yet read: the tree changes under the CLI.
    if (req.url === '/upload/start' && ++starts === 1) fs.writeFileSync(path.join(dir, 'index.html'), grown)
    return { kind: 'pass' }
  }
  const up = await runCli(t, ['upload', 'site', '--chunk-size', '1M', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(up.stderr, /site changed while it was uploaded \(the tar grew\); sending it again/)
  t.equal(starts, 2, 'a second session')
  t.same(stateFiles(env), [], 'no resume state is left')
  const out = path.join(env.cwd, 'out')
  const down = await runCli(t, ['download', (JSON.parse(up.stdout) as { code: string }).code, '--extract', '-o', out, '-q'], env)
  t.equal(down.status, 0, down.stderr)
  t.equal(fs.readFileSync(path.join(out, 'site', 'index.html'), 'utf8'), grown, 'the tree as it was when sent')
})

t.test('a directory that changes while a chunk is in flight: that request is cut, not retried beside the new session', async t => {
  // Found on Node 24 in CI: a chunk of the given-up session stayed in flight, its hash waiting
  // on a closed worker, and was retried for minutes after the new session had completed.
  const { proxy, env, dir } = await siteTest(t, 35)
  const grown = `<h1>${'y'.repeat(5000)}</h1>`
  let starts = 0
  let chunks = 0
  proxy.decide = req => {
    if (req.url === '/upload/start' && ++starts === 1) fs.writeFileSync(path.join(dir, 'index.html'), grown)
    // The first session's first chunk is read but gets no answer: it is in flight when the change
    // is found (read, so that the proxy sees the connection close).
    if (req.url === '/upload/chunk' && ++chunks === 1) { req.resume(); return { kind: 'hold' } }
    return { kind: 'pass' }
  }
  const began = Date.now()
  const up = await runCli(t, ['upload', 'site', '--chunk-size', '1M', '--parallel', '2', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(up.stderr, /site changed while it was uploaded \(the tar grew\); sending it again/)
  // Left in flight, the request would keep the CLI from exiting until its idle timeout (120 s).
  t.ok(Date.now() - began < 60_000, 'the CLI exits without waiting for the held request')
  t.ok(proxy.seen.find(s => s.path === '/upload/chunk')!.done, 'the held request was cut by the CLI')
  const restart = proxy.seen.findIndex((s, i) => s.path === '/upload/start' && i > 0)
  const after = proxy.seen.slice(restart).map(s => s.path)
  t.same(after, ['/upload/start', ...Array(4).fill('/upload/chunk'), '/upload/complete'], 'after the new start: its 4 chunks and its complete, nothing of the first session')
  t.same(stateFiles(env), [], 'no resume state is left')
  const down = await runCli(t, ['download', (JSON.parse(up.stdout) as { code: string }).code, '--extract', '-o', path.join(env.cwd, 'out'), '-q'], env)
  t.equal(down.status, 0, down.stderr)
  t.equal(fs.readFileSync(path.join(env.cwd, 'out', 'site', 'index.html'), 'utf8'), grown)
})
