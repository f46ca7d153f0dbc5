/**
 * Corruption on the wire, produced for real by a proxy that flips one byte: on the way down the
 * CLI detects it through Repr-Digest, exits 5 and leaves no partial file; on the way up the
 * service refuses the chunk (chunk_sha256) and the CLI sends it again.
 *
 * Run on both driver pairs by integrity-fs.test.ts and integrity-s3.test.ts.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Test } from 'tap'
import { API_KEY } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { flipAt, startProxy } from './proxy.js'
import { cliEnv, runCli, stateFiles } from './run.js'

const MiB = 1024 * 1024

/** Corruption on the wire, both ways, against a server process started with `serverEnv`. */
export async function cliIntegritySuite (t: Test, serverEnv: Record<string, string>) {
  const server = await startServer(t, serverEnv)

  t.test('a byte flipped on the way down: exit 5, the partial file removed', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(3 * MiB, 21)
    fs.writeFileSync(path.join(env.cwd, 'report.pdf'), data)
    const up = await runCli(t, ['upload', 'report.pdf', '--max-downloads', '3', '-q'], env)
    t.equal(up.status, 0, up.stderr)
    const code = up.stdout.trim()
    proxy.decide = req => req.method === 'GET' ? { kind: 'alter', response: () => flipAt(2 * MiB + 17) } : { kind: 'pass' }

    const out = fs.mkdtempSync(path.join(env.cwd, 'out-'))
    const down = await runCli(t, ['download', code], { ...env, cwd: out })
    t.equal(down.status, 5, 'integrity failure')
    t.match(down.stderr, /integrity check failed.*the partial file was removed/)
    t.equal(down.stdout, '')
    t.same(fs.readdirSync(out), [], 'neither the file nor a partial file is left')
    t.same(stateFiles(env), [], 'no resume state is left')

    const named = await runCli(t, ['download', code, '-o', path.join(out, 'r.pdf')], env)
    t.equal(named.status, 5)
    t.same(fs.readdirSync(out), [], '-o: nothing left either')

    proxy.decide = () => ({ kind: 'pass' })
    const good = await runCli(t, ['download', code], { ...env, cwd: out })
    t.equal(good.status, 0, 'the same code downloads fine without the flip')
    t.equal(sha256Of(fs.readFileSync(path.join(out, 'report.pdf'))), sha256Of(data))
  })

  t.test('a byte flipped on the way up: the service refuses the chunk, the CLI sends it again', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(3 * MiB + 5, 22)
    fs.writeFileSync(path.join(env.cwd, 'a.bin'), data)
    let flipped = false
    proxy.decide = req => {
      if (req.url !== '/upload/chunk' || flipped) return { kind: 'pass' }
      flipped = true
      return { kind: 'alter', request: () => flipAt(100_000) } // inside the chunk's bytes
    }
    const up = await runCli(t, ['upload', 'a.bin', '--chunk-size', '1M', '--parallel', '1'], env)
    t.equal(up.status, 0, up.stderr)
    t.match(up.stderr, /chunk 0: 400 DROPCODE_DIGEST_MISMATCH.*retrying/)
    const chunks = proxy.seen.filter(s => s.path === '/upload/chunk')
    t.same(chunks.map(c => c.status), [400, 200, 200, 200, 200], 'chunk 0 refused once, then every chunk stored')
    const down = await runCli(t, ['download', up.stdout.trim(), '-o', '-', '-q'], env)
    t.equal(sha256Of(down.stdoutBytes), sha256Of(data))
  })

  t.test('a byte flipped in a single upload: the sha256 sent after the file catches it, the CLI sends it again', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(300_000, 23)
    fs.writeFileSync(path.join(env.cwd, 'small.bin'), data)
    let flipped = false
    proxy.decide = req => {
      if (req.url !== '/upload' || flipped) return { kind: 'pass' }
      flipped = true
      return { kind: 'alter', request: () => flipAt(150_000) }
    }
    const up = await runCli(t, ['upload', 'small.bin', '--json'], env)
    t.equal(up.status, 0, up.stderr)
    t.match(up.stderr, /upload: 400 DROPCODE_DIGEST_MISMATCH.*retrying/)
    t.same(proxy.seen.map(s => s.status), [400, 200])
    t.match(JSON.parse(up.stdout), { size: data.length, sha256: sha256Of(data) })
  })
}
