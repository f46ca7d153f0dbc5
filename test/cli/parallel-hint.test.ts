/**
 * The service's hints (issue 21). Chunks in flight: without `--parallel` the CLI sends as many
 * chunks at once as the service suggests in GET /limits (`chunks_in_flight`: 1 on the
 * filesystem, where a chunk that arrives right after the ones before it is hashed as it streams,
 * 4 on S3), and 4 when the service does not say; counted through a proxy that holds every chunk
 * request: what is held once the CLI has stopped starting new ones is what it keeps in flight.
 * Chunk size: without `--chunk-size` the CLI declares the service's `chunk_size` (64 MiB on the
 * filesystem: each chunk costs the service a few ms besides its bytes), within 1–64 MiB and the
 * service's max_chunk_size, and 8 MiB when the service does not say (a file of up to 8 MiB is one
 * request without asking); counted by the chunks sent.
 */
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { record, startProxy, type Action, type Proxy } from './proxy.js'
import { cliEnv, runCli, startCli } from './run.js'
import { until } from '../helpers/until.js'

const MiB = 1024 * 1024
const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

t.test('the service tells: 1 chunk of 64 MiB in flight on the filesystem (GET /limits)', async t => {
  const res = await fetch(`${server.url}/limits`)
  t.equal(res.status, 200)
  t.match(await res.json(), { chunks_in_flight: 1, chunk_size: 64 * MiB })
})

/** Starts an upload of 10 chunks whose chunk requests are all held; resolves with how many were in flight. */
async function inFlight (t: Test, proxy: Proxy, args: string[], limits?: Action): Promise<number> {
  const env = cliEnv(t, proxy.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), bytes(10 * MiB, 41))
  let held = 0
  proxy.decide = req => {
    if (req.url === '/limits' && limits !== undefined) return limits
    if (req.url !== '/upload/chunk') return { kind: 'pass' }
    held++
    return { kind: 'hold' }
  }
  const cli = startCli(t, ['upload', 'app.bin', '--chunk-size', '1M', ...args], env)
  await until(() => held > 0, 20_000, 'a chunk request')
  await sleep(1000) // time enough to start more, if it would
  cli.child.kill('SIGKILL')
  await cli.done
  return held
}

t.test('without --parallel: as many chunks in flight as the service suggests, 4 when it does not say', async t => {
  const proxy = await startProxy(t, server.url)
  t.equal(await inFlight(t, proxy, []), 1, 'the service (filesystem): 1')
  t.ok(proxy.seen.some(s => s.path === '/limits'), 'asked /limits')
  const service = { 'content-type': 'application/json', 'dropcode-version': '0.1.0' }
  t.equal(await inFlight(t, proxy, [], { kind: 'answer', status: 200, headers: service, body: '{"chunks_in_flight":3}' }), 3, 'a service that suggests 3')
  t.equal(await inFlight(t, proxy, [], { kind: 'answer', status: 200, headers: service, body: '{"chunks_in_flight":100}' }), 8, 'a suggestion is capped at 8')
  t.equal(await inFlight(t, proxy, [], { kind: 'answer', status: 404, headers: service, body: '{"error":"not found"}' }), 4, 'an older service without /limits: 4')
  t.equal(await inFlight(t, proxy, [], { kind: 'answer', status: 200, headers: service, body: '{"max_file_size":1}' }), 4, 'a service that does not say: 4')
  t.equal(await inFlight(t, proxy, [], { kind: 'answer', status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad Gateway</h1>' }), 4, 'a proxy\'s error, not retried: 4')
})

t.test('--parallel wins over the hint, and /limits is not asked', async t => {
  const proxy = await startProxy(t, server.url)
  t.equal(await inFlight(t, proxy, ['--parallel', '2']), 2)
  t.notOk(proxy.seen.some(s => s.path === '/limits'))
})

t.test('the default upload goes through, one chunk at a time, bytes intact', async t => {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const data = bytes(5 * MiB + 7, 42)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), data)
  const up = await runCli(t, ['upload', 'app.bin', '--chunk-size', '1M', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  t.match(JSON.parse(up.stdout), { size: data.length, sha256: sha256Of(data) })
  t.equal(proxy.maxChunksInFlight, 1, 'never more than one chunk request at once')
})

/** Uploads `size` bytes without --chunk-size, /limits answered `limits` (or the service's own); resolves with the chunk requests' count and the size declared at start. */
async function chunking (t: Test, size: number, limits?: string): Promise<{ chunks: number, declared: string | undefined, asked: boolean, status: number | null }> {
  const proxy = await startProxy(t, server.url)
  const env = cliEnv(t, proxy.url, API_KEY)
  const data = bytes(size, 43)
  fs.writeFileSync(path.join(env.cwd, 'app.bin'), data)
  const service = { 'content-type': 'application/json', 'dropcode-version': '0.1.0' }
  const start: Buffer[] = []
  proxy.decide = req => {
    if (req.url === '/limits' && limits !== undefined) return { kind: 'answer', status: 200, headers: service, body: limits }
    if (req.url === '/upload/start') return { kind: 'alter', request: () => record(start) }
    return { kind: 'pass' }
  }
  const up = await runCli(t, ['upload', 'app.bin', '--json'], env)
  t.equal(up.status, 0, up.stderr)
  if (up.status === 0) t.match(JSON.parse(up.stdout), { size, sha256: sha256Of(data) }, 'stored intact')
  const declared = /name="chunk_size"\r\n\r\n(\d+)\r\n/.exec(Buffer.concat(start).toString('latin1'))?.[1]
  return { chunks: proxy.seen.filter(s => s.path === '/upload/chunk').length, declared, asked: proxy.seen.some(s => s.path === '/limits'), status: up.status }
}

t.test('without --chunk-size: the chunk size the service suggests, within 1-64 MiB and its max_chunk_size; 8 MiB when it does not say', async t => {
  t.match(await chunking(t, 70 * MiB), { chunks: 2, declared: String(64 * MiB) }, 'the service (filesystem): 64 MiB')
  t.match(await chunking(t, 9 * MiB + 1, '{"chunk_size":1048576,"chunks_in_flight":2}'), { chunks: 10, declared: String(MiB) }, 'a service that suggests 1 MiB')
  t.match(await chunking(t, 9 * MiB + 1, '{"chunk_size":4194304,"max_chunk_size":2097152}'), { chunks: 5, declared: String(2 * MiB) }, 'capped by max_chunk_size')
  t.match(await chunking(t, 9 * MiB + 1, '{"chunk_size":1}'), { chunks: 10, declared: String(MiB) }, 'at least 1 MiB')
  t.match(await chunking(t, 8 * MiB, '{"chunk_size":1048576}'), { chunks: 0, declared: undefined, asked: false }, 'a file of up to 8 MiB: one request, /limits not asked')
  t.match(await chunking(t, 17 * MiB, '{"max_file_size":1073741824}'), { chunks: 3, declared: String(8 * MiB) }, 'a service that does not say: 8 MiB')
  t.match(await chunking(t, 9 * MiB, '{"chunk_size":16777216}'), { chunks: 0, declared: undefined, asked: true }, 'a file within the suggested size: one request')
})
