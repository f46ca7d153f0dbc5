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
import { API_KEY, testEnv, type DriverPair } from '../../helpers/app.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { killServer, startServer, type ServerProcess } from '../../helpers/server-process.js'
import { bytes, sha256Of } from '../../helpers/streams.js'
import { startTcpRelay } from '../../helpers/tcp-relay.js'
import { startProxy, stopAfter, type Proxy } from '../../cli/proxy.js'
import { cliEnv, runCli, startCli } from '../../cli/run.js'
import { until } from '../../helpers/until.js'

const MiB = 1024 * 1024

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

type Stage = 'chunk' | 'complete'

async function killMid (t: Test, pair: DriverPair, stage: Stage) {
  // CHUNK_LOCK_SECONDS: the default for the embedded server, whose restart on a loaded machine can
  // take seconds (the lock must still be live when it is up again); shorter with two instances.
  const lease = pair === 'fs+local' ? 15 : 6
  const env = testEnv(t, pair, { redis, s3 }, { CHUNK_LOCK_SECONDS: String(lease) })
  // The first instance's S3 goes through a relay, frozen when the CLI asks to complete.
  const relay = await startTcpRelay(Number(new URL(s3.endpoint).port))
  t.teardown(() => relay.close())
  const first = await startServer(t, pair === 's3+redis' ? { ...env, S3_ENDPOINT: s3.endpoint.replace(/:\d+$/, `:${relay.port}`) } : env)
  // S3 + Redis: a second instance takes over; embedded: the same DATA_DIR restarted.
  const other = pair === 's3+redis' ? await startServer(t, env) : undefined
  const proxy = await startProxy(t, first.url)
  const cli = cliEnv(t, proxy.url, API_KEY)
  const data = bytes(6 * MiB, 21)
  fs.writeFileSync(path.join(cli.cwd, 'big.bin'), data)

  let chunks = 0
  proxy.decide = req => {
    // The 4th chunk request stops after 300 kB of its body: the service holds its lock, renewing it.
    if (stage === 'chunk' && req.url === '/upload/chunk' && ++chunks === 4) return { kind: 'alter', request: () => stopAfter(300_000) }
    if (stage === 'complete' && req.url === '/upload/complete') relay.freeze()
    return { kind: 'pass' }
  }
  const upload = startCli(t, ['upload', 'big.bin', '--chunk-size', '1M', '--parallel', '2', '--retries', '1'], cli)
  await until(() => stage === 'chunk'
    ? proxy.seen.filter(s => s.path === '/upload/chunk' && s.status === 200).length === 5
    : proxy.seen.some(s => s.path === '/upload/complete'), 30_000, stage === 'chunk' ? 'the five other chunks stored' : 'complete sent')
  await sleep(1_000)
  const killedAt = await kill(t, proxy, first, other, env)

  const result = await upload.done
  t.equal(result.status, 0, `the CLI finished ${result.ms} ms after it started, ${Date.now() - killedAt} ms after the kill: ${result.stderr}`)
  const busy = proxy.seen.filter(s => s.path === `/upload/${stage}` && s.status === 409)
  t.ok(busy.length >= 1, `the dead holder's ${stage === 'chunk' ? 'lock' : 'lease'} was live at first (${busy.length} × 409)`)
  const waits = busy.map(s => Number(s.responseHeaders?.['retry-after']))
  t.ok(waits.every(s => s >= 1 && s <= lease), `each 409 had Retry-After within the lease (${waits.join(', ')} s of ${lease})`)
  t.match(result.stderr, stage === 'chunk'
    ? /chunk 3: 409 DROPCODE_SESSION_BUSY: Chunk 3 is locked by another request, which may have died/
    : /upload complete: 409 DROPCODE_SESSION_BUSY: The session is completing.*may have died/, 'the CLI shows why it waits')
  const code = result.stdout.trim()
  t.match(code, /^[A-Za-z0-9]{6}$/)
  const down = await runCli(t, ['download', code, '-o', '-', '-q'], cli)
  t.equal(sha256Of(down.stdoutBytes), sha256Of(data), 'the file is whole')
}

/** kill -9 of `first`; the proxy sends everything to `other`, or queues it until `first` is restarted. */
async function kill (t: Test, proxy: Proxy, first: ServerProcess, other: ServerProcess | undefined, env: Record<string, string>) {
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
  return killedAt
}

t.test('embedded (fs + LMDB): kill -9 and restart mid-chunk; the CLI waits out the dead lock and finishes', t => killMid(t, 'fs+local', 'chunk'))

t.test('S3 + Redis, two instances: kill -9 of the one receiving a chunk; the CLI waits out its lock on the other and finishes', t => killMid(t, 's3+redis', 'chunk'))

t.test('S3 + Redis, two instances: kill -9 of the one completing the session; the other takes over within seconds and the CLI finishes', t => killMid(t, 's3+redis', 'complete'))
