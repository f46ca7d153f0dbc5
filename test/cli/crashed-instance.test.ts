/**
 * Issue 20: `kill -9` of the instance receiving a chunk from the real CLI. The chunk's lock
 * outlives its dead holder for its lease, and the CLI's retry of that chunk (on a restarted
 * embedded server, or on the other of two S3 + Redis instances) is answered 409 until the lease
 * runs out. The 409 says how long (Retry-After) and that the holder may have died, and the CLI
 * waits for it without spending its retries: with `--retries 1`, spent on the cut connection,
 * it still finishes. A proxy in front stalls the chunk midway so the kill lands
 * while the lock is held, and queues requests while the embedded server restarts.
 */
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Test } from 'tap'
import { API_KEY, testEnv, type DriverPair } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { killServer, startServer } from '../helpers/server-process.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { startProxy, stopAfter } from './proxy.js'
import { cliEnv, runCli, startCli, until } from './run.js'

const MiB = 1024 * 1024
const LEASE_S = 6 // CHUNK_LOCK_SECONDS

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

async function killMidChunk (t: Test, pair: DriverPair) {
  const env = testEnv(t, pair, { redis, s3 }, { CHUNK_LOCK_SECONDS: String(LEASE_S) })
  const first = await startServer(t, env)
  // S3 + Redis: a second instance takes over; embedded: the same DATA_DIR restarted.
  const other = pair === 's3+redis' ? await startServer(t, env) : undefined
  const proxy = await startProxy(t, first.url)
  const cli = cliEnv(t, proxy.url, API_KEY)
  const data = bytes(6 * MiB, 21)
  fs.writeFileSync(path.join(cli.cwd, 'big.bin'), data)

  // The 4th chunk request stops after 300 kB of its body: the service holds its lock, renewing it.
  let chunks = 0
  proxy.decide = req => req.url === '/upload/chunk' && ++chunks === 4 ? { kind: 'alter', request: () => stopAfter(300_000) } : { kind: 'pass' }
  const upload = startCli(t, ['upload', 'big.bin', '--chunk-size', '1M', '--parallel', '2', '--retries', '1'], cli)
  await until(() => proxy.seen.filter(s => s.path === '/upload/chunk' && s.status === 200).length === 5, 30_000, 'the five other chunks stored')
  await sleep(1_000)
  let open = () => {}
  if (other !== undefined) proxy.upstream = other.url
  else proxy.gate = new Promise(resolve => { open = resolve })
  await killServer(first)
  const killedAt = Date.now()
  if (other === undefined) {
    proxy.upstream = (await startServer(t, env)).url
    proxy.gate = undefined
    open()
  }

  const result = await upload.done
  t.equal(result.status, 0, `the CLI finished ${result.ms} ms after it started, ${Date.now() - killedAt} ms after the kill: ${result.stderr}`)
  const busy = proxy.seen.filter(s => s.path === '/upload/chunk' && s.status === 409)
  t.ok(busy.length >= 1, `the dead holder's lock was live at first (${busy.length} × 409)`)
  const waits = busy.map(s => Number(s.responseHeaders?.['retry-after']))
  t.ok(waits.every(s => s >= 1 && s <= LEASE_S), `each 409 had Retry-After within the lease (${waits.join(', ')} s of ${LEASE_S})`)
  t.match(result.stderr, /chunk 3: 409 DROPCODE_SESSION_BUSY: Chunk 3 is locked by another request, which may have died/, 'the CLI shows why it waits')
  const code = result.stdout.trim()
  t.match(code, /^[A-Za-z0-9]{6}$/)
  const down = await runCli(t, ['download', code, '-o', '-', '-q'], cli)
  t.equal(sha256Of(down.stdoutBytes), sha256Of(data), 'the file is whole')
}

t.test('embedded (fs + LMDB): kill -9 and restart mid-chunk; the CLI waits out the dead lock and finishes', t => killMidChunk(t, 'fs+local'))

t.test('S3 + Redis, two instances: kill -9 of the one receiving a chunk; the CLI waits out its lock on the other and finishes', t => killMidChunk(t, 's3+redis'))
