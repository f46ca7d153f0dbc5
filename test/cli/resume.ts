/**
 * Resuming after the CLI was killed (kill -9, by the pid this test started): mid-upload the
 * rerun asks verify and sends only the missing chunks; mid-download it continues the partial
 * file with Range + If-Range and counts no second download. A proxy holds requests so the kill
 * lands at a known point.
 *
 * Run on both driver pairs by resume-fs.test.ts and resume-s3.test.ts.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Test } from 'tap'
import { API_KEY } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { cutAfter, PAST_SOCKET_BUFFERS, startProxy, stopAfter } from './proxy.js'
import { cliEnv, fileSize, killUploadAfterChunks, runCli, startCli, stateFiles } from './run.js'
import { until } from '../helpers/until.js'

const MiB = 1024 * 1024

/** Resuming after kill -9 of the CLI and after a cut connection, against a server process started with `serverEnv`. */
export async function cliResumeSuite (t: Test, serverEnv: Record<string, string>) {
  const server = await startServer(t, serverEnv)

  t.test('an upload killed midway resumes: only the missing chunks are sent', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(8 * MiB, 11)
    fs.writeFileSync(path.join(env.cwd, 'app.bin'), data)
    const args = ['upload', 'app.bin', '--chunk-size', '1M', '--parallel', '2']

    // First run: three chunks get through, then every chunk request is held (two, at --parallel 2).
    t.equal((await killUploadAfterChunks(t, proxy, args, env, 3, 2)).signal, 'SIGKILL')
    t.equal(stateFiles(env).length, 1, 'the session is remembered')
    const before = proxy.seen.length
    const second = await runCli(t, args, env)
    t.equal(second.status, 0, second.stderr)
    t.match(second.stdout, /^[A-Za-z0-9]{6}\n$/)
    t.match(second.stderr, /resuming upload: 3 of 8 chunks already sent/)
    const rerun = proxy.seen.slice(before)
    t.same(rerun.filter(s => s.path !== '/upload/chunk').map(s => s.path), ['/upload/verify', '/upload/complete'], 'no new session')
    t.equal(rerun.filter(s => s.path === '/upload/chunk').length, 5, 'the five missing chunks, and only them')
    t.same(stateFiles(env), [], 'state removed once complete')

    const down = await runCli(t, ['download', second.stdout.trim(), '-o', '-', '-q'], env)
    t.equal(sha256Of(down.stdoutBytes), sha256Of(data), 'the file is whole')
  })

  t.test('killed while the complete\'s answer was on its way: the rerun takes the code from verify and sends nothing else (cli_complete_answer_lost)', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(3 * MiB, 17)
    fs.writeFileSync(path.join(env.cwd, 'app.bin'), data)
    const args = ['upload', 'app.bin', '--chunk-size', '1M']
    // The service completes; its answer is held until the CLI is killed.
    proxy.decide = req => req.url === '/upload/complete' ? { kind: 'alter', response: () => stopAfter(0) } : { kind: 'pass' }
    const first = startCli(t, args, env)
    await until(() => proxy.seen.some(s => s.path === '/upload/complete' && s.status === 200), 20_000, 'the session completed')
    first.child.kill('SIGKILL')
    await first.done
    proxy.decide = () => ({ kind: 'pass' })
    t.equal(stateFiles(env).length, 1, 'the session is remembered')

    const before = proxy.seen.length
    const rerun = await runCli(t, args, env)
    t.equal(rerun.status, 0, rerun.stderr)
    t.match(rerun.stdout, /^[A-Za-z0-9]{6}\n$/)
    t.same(proxy.seen.slice(before).map(s => s.path), ['/upload/verify'], 'one verify: no chunk, no complete')
    t.same(stateFiles(env), [], 'state removed')
    const down = await runCli(t, ['download', rerun.stdout.trim(), '-o', '-', '-q'], env)
    t.equal(sha256Of(down.stdoutBytes), sha256Of(data), 'the code is the completed file\'s')
  })

  t.test('a download killed midway resumes from the partial file without counting again', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(24 * MiB, 12)
    fs.writeFileSync(path.join(env.cwd, 'src.bin'), data)
    const up = await runCli(t, ['upload', 'src.bin', '--name', 'image.iso', '-q'], env) // max_downloads 1
    t.equal(up.status, 0, up.stderr)
    const code = up.stdout.trim()
    const out = fs.mkdtempSync(path.join(env.cwd, 'out-'))
    const part = path.join(out, 'image.iso.dropcode-part')

    // First run: the body stops after 3 MiB (the connection stays open), then the CLI is killed.
    proxy.decide = req => req.method === 'GET' ? { kind: 'alter', response: () => stopAfter(3 * MiB) } : { kind: 'pass' }
    const first = startCli(t, ['download', code], { ...env, cwd: out })
    await until(() => fileSize(part) === 3 * MiB, 20_000, '3 MiB in the partial file')
    first.child.kill('SIGKILL')
    await first.done
    t.notOk(fs.existsSync(path.join(out, 'image.iso')), 'nothing under the final name yet')

    proxy.decide = () => ({ kind: 'pass' })
    const before = proxy.seen.length
    const second = await runCli(t, ['download', code], { ...env, cwd: out })
    t.equal(second.status, 0, second.stderr)
    t.match(second.stderr, /resuming download at 3145728 of 25165824 bytes/)
    const get = proxy.seen.slice(before).find(s => s.method === 'GET')!
    t.equal(get.headers.range, `bytes=${3 * MiB}-`)
    t.match(get.headers['if-range'], /^"c-/, 'If-Range names the claim')
    t.equal(get.status, 206)
    t.equal(sha256Of(fs.readFileSync(path.join(out, 'image.iso'))), sha256Of(data), 'the file is whole and verified')
    t.same(fs.readdirSync(out), ['image.iso'])
    t.same(stateFiles(env), [])
    const again = await runCli(t, ['download', code, '-o', '-'], env)
    t.equal(again.status, 4, 'the one permitted download was counted once: the code is used up')
  })

  t.test('a directory upload killed midway resumes too (the tar is the same bytes again)', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const site = path.join(env.cwd, 'site')
    fs.mkdirSync(path.join(site, 'b'), { recursive: true })
    fs.writeFileSync(path.join(site, 'a.bin'), bytes(2 * MiB, 31))
    fs.writeFileSync(path.join(site, 'b', 'c.bin'), bytes(3 * MiB, 32))
    const args = ['upload', 'site', '--chunk-size', '1M', '--parallel', '1']
    await killUploadAfterChunks(t, proxy, args, env, 2, 1)
    const before = proxy.seen.length
    const second = await runCli(t, args, env)
    t.equal(second.status, 0, second.stderr)
    t.match(second.stderr, /resuming upload: 2 of 6 chunks already sent/)
    t.same(proxy.seen.slice(before).filter(s => s.path === '/upload/chunk').length, 4, 'only the four missing chunks')

    const out = path.join(env.cwd, 'out')
    const down = await runCli(t, ['download', second.stdout.trim(), '--extract', '-o', out, '-q'], env)
    t.equal(down.status, 0, down.stderr)
    t.same(fs.readFileSync(path.join(out, 'site', 'b', 'c.bin')), fs.readFileSync(path.join(site, 'b', 'c.bin')))
    t.same(fs.readFileSync(path.join(out, 'site', 'a.bin')), fs.readFileSync(path.join(site, 'a.bin')))
  })

  t.test('a connection cut midway is resumed within the same run (206, nothing counted)', async t => {
    const proxy = await startProxy(t, server.url)
    const env = cliEnv(t, proxy.url, API_KEY)
    const data = bytes(PAST_SOCKET_BUFFERS, 13)
    fs.writeFileSync(path.join(env.cwd, 'in.bin'), data)
    const up = await runCli(t, ['upload', 'in.bin', '--name', 'out.bin', '-q'], env) // max_downloads 1
    t.equal(up.status, 0, up.stderr)
    let gets = 0
    proxy.decide = req => req.method === 'GET' && ++gets === 1 ? { kind: 'alter', response: () => cutAfter(5 * MiB) } : { kind: 'pass' }
    const out = fs.mkdtempSync(path.join(env.cwd, 'out-'))
    const down = await runCli(t, ['download', up.stdout.trim()], { ...env, cwd: out })
    t.equal(down.status, 0, down.stderr)
    t.match(down.stderr, new RegExp(`download cut at \\d+ of ${PAST_SOCKET_BUFFERS} bytes`))
    const getsSeen = proxy.seen.filter(s => s.method === 'GET' && s.path.startsWith('/download/')) // not the upload's GET /limits
    t.same(getsSeen.map(s => s.status), [200, 206], 'one claim, then its resume')
    t.match(getsSeen[1]!.headers.range, /^bytes=\d+-$/)
    t.equal(sha256Of(fs.readFileSync(path.join(out, 'out.bin'))), sha256Of(data))
  })
}
