/**
 * Upload and download through the CLI as a subprocess against the real service process, run
 * once per driver pair (fs-local.test.ts, s3-redis.test.ts).
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Test } from 'tap'
import { API_KEY, testEnv, type Backends, type DriverPair } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { record, startProxy } from './proxy.js'
import { cliEnv, runCli, stateFiles } from './run.js'

const MiB = 1024 * 1024
const CODE_LINE = /^[A-Za-z0-9]{6}\n$/

export async function roundTripSuite (t: Test, pair: DriverPair, backends: Backends) {
  // One service for the file (starting one costs a second or more); each test has its own codes.
  const serverEnv = testEnv(t, pair, backends, { LOG_LEVEL: 'warn' })
  const server = await startServer(t, serverEnv)
  t.test(`${pair}: /limits suggests the chunks in flight and the chunk size the CLI uses without --parallel and --chunk-size`, async t => {
    const limits = await (await fetch(`${server.url}/limits`)).json() as { chunks_in_flight?: number, chunk_size?: number }
    t.equal(limits.chunks_in_flight, pair.startsWith('fs') ? 1 : 4)
    t.equal(limits.chunk_size, pair.startsWith('fs') ? 64 * MiB : Number(serverEnv.S3_PART_SIZE ?? 8 * MiB), 'fs: 64 MiB; S3: its part size')
  })
  t.test(`${pair}: a multi-chunk file goes up with chunks in parallel and comes back verified`, async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(5 * MiB + 12345, 7)
    fs.writeFileSync(path.join(env.cwd, 'build.bin'), data)

    const start: Buffer[] = []
    const complete: Buffer[] = []
    proxy.decide = req => req.url === '/upload/start' || req.url === '/upload/complete' ? { kind: 'alter', request: () => record(req.url === '/upload/start' ? start : complete) } : { kind: 'pass' }
    const up = await runCli(t, ['upload', 'build.bin', '--chunk-size', '1M', '--parallel', '3', '--max-downloads', '2'], env)
    t.equal(up.status, 0, up.stderr)
    t.match(up.stdout, CODE_LINE, 'stdout is the code and nothing else')
    const chunks = proxy.seen.filter(s => s.path === '/upload/chunk')
    t.equal(chunks.length, 6, 'six chunks, each sent once')
    t.ok(chunks.every(c => c.headers['content-length'] !== undefined && c.status === 200), 'chunks carry a Content-Length and were accepted')
    t.ok(proxy.maxChunksInFlight >= 2, `chunks were in flight together (at most ${proxy.maxChunksInFlight})`)
    t.same(proxy.seen.filter(s => s.path.startsWith('/upload')).map(s => s.path).filter(p => p !== '/upload/chunk'), ['/upload/start', '/upload/complete'])
    t.same(stateFiles(env), [], 'no resume state is left after success')
    t.match(Buffer.concat(start).toString(), new RegExp(`name="chunk_size"\r\n\r\n${MiB}\r\n`), '/upload/start declares the chunk size')
    t.match(Buffer.concat(complete).toString(), new RegExp(`name="sha256"\r\n\r\n${sha256Of(data)}\r\n`), '/upload/complete declares the file\'s SHA-256, hashed while the chunks went out')

    const code = up.stdout.trim()
    const out = fs.mkdtempSync(path.join(env.cwd, 'out-'))
    const down = await runCli(t, ['download', code], { ...env, cwd: out })
    t.equal(down.status, 0, down.stderr)
    t.equal(down.stdout, '', 'download prints nothing on stdout')
    t.equal(sha256Of(fs.readFileSync(path.join(out, 'build.bin'))), sha256Of(data), 'same bytes, under the uploaded name')
    t.same(fs.readdirSync(out), ['build.bin'], 'no partial file left')

    const info = await runCli(t, ['info', code, '--json'], env)
    t.equal(info.status, 0, info.stderr)
    t.same(JSON.parse(info.stdout), { code, name: 'build.bin', size: data.length, content_type: 'application/octet-stream', sha256: sha256Of(data) })
    t.equal((await runCli(t, ['delete', code], env)).status, 0)
    t.equal((await runCli(t, ['download', code, '-o', '-'], env)).status, 4, 'deleted: not found')
  })

  t.test(`${pair}: chunks of 5 MiB (S3 multipart parts), --json`, async t => {
    const env = cliEnv(t, server.url, API_KEY)
    const data = bytes(11 * MiB, 3)
    fs.writeFileSync(path.join(env.cwd, 'disk.img'), data)
    const up = await runCli(t, ['upload', 'disk.img', '--chunk-size', '5MiB', '--parallel', '2', '--json', '--expiry-hours', '2'], env)
    t.equal(up.status, 0, up.stderr)
    const result = JSON.parse(up.stdout) as Record<string, unknown>
    t.match(result, { code: /^[A-Za-z0-9]{6}$/, size: data.length, sha256: sha256Of(data), name: 'disk.img', expiry_hours: 2 })
    t.ok(Math.abs(Date.parse(result.expires_at as string) - Date.now() - 2 * 3_600_000) < 60_000, 'expires_at is two hours from now')
    const down = await runCli(t, ['download', result.code as string, '-o', '-', '--quiet'], env)
    t.equal(down.status, 0, down.stderr)
    t.equal(down.stderr, '', '--quiet: nothing on stderr')
    t.equal(sha256Of(down.stdoutBytes), sha256Of(data), '-o -: the bytes on stdout')
  })

  t.test(`${pair}: a directory goes up as a tar stream and comes back with --extract`, async t => {
    const env = cliEnv(t, server.url, API_KEY)
    const dist = path.join(env.cwd, 'dist')
    fs.mkdirSync(path.join(dist, 'assets', 'img'), { recursive: true })
    fs.writeFileSync(path.join(dist, 'index.html'), '<h1>hi</h1>\n')
    fs.writeFileSync(path.join(dist, 'assets', 'app.js'), bytes(1_500_000, 5))
    fs.writeFileSync(path.join(dist, 'assets', 'img', 'logo.png'), bytes(900_000, 6))
    fs.symlinkSync('app.js', path.join(dist, 'assets', 'latest.js'))
    const up = await runCli(t, ['upload', 'dist/', '--chunk-size', '1M', '--parallel', '2'], env)
    t.equal(up.status, 0, up.stderr)
    t.match(up.stdout, CODE_LINE)
    const code = up.stdout.trim()
    const info = await runCli(t, ['info', code, '--json'], env)
    t.match(JSON.parse(info.stdout), { name: 'dist.tar', content_type: 'application/x-tar' })

    const out = path.join(env.cwd, 'unpacked')
    const down = await runCli(t, ['download', code, '--extract', '-o', out], env)
    t.equal(down.status, 0, down.stderr)
    for (const f of ['index.html', 'assets/app.js', 'assets/img/logo.png']) {
      t.same(fs.readFileSync(path.join(out, 'dist', f)), fs.readFileSync(path.join(dist, f)), `dist/${f} is the same`)
    }
    t.equal(fs.readlinkSync(path.join(out, 'dist', 'assets', 'latest.js')), 'app.js', 'the symlink inside the tree is kept')
    t.same(fs.readdirSync(out), ['dist'], 'the downloaded archive is removed after extraction')
  })
}
