/**
 * What `WAIT 1` after each download claim would cost (README, "Scaling", "Redis failover"):
 * `node --import=tsx bench/redis-wait.ts`. Starts a private primary and a `--replicaof` replica
 * on free loopback ports, then runs 5,000 claims on one file, one at a time and 50 at once,
 * without and with `WAIT 1 1000` after each (claims/s, p50/p99 latency). Stops both servers.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { createServer, type AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { newBlobKey, newCode } from '../src/core/ids.js'
import { createRedisBackend } from '../src/state/redis/index.js'

const freePort = () => new Promise<number>(resolve => {
  const srv = createServer().listen(0, '127.0.0.1', () => { const { port } = srv.address() as AddressInfo; srv.close(() => resolve(port)) })
})
const [pp, rp] = [await freePort(), await freePort()]
// --dir: a replica's full sync writes dump.rdb there (by default into the working directory).
const dir = mkdtempSync(path.join(tmpdir(), 'dropcode-redis-wait-'))
const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning', '--dir', dir]
const servers = [
  spawn('redis-server', ['--port', String(pp), ...common], { stdio: 'ignore' }),
  spawn('redis-server', ['--port', String(rp), '--replicaof', '127.0.0.1', String(pp), ...common], { stdio: 'ignore' })
]
try {
  const client = new Redis(pp, '127.0.0.1', { retryStrategy: times => Math.min(times * 50, 500) })
  client.on('error', () => {}) // refused until the server listens
  while (!/state=online/.test(await client.info('replication').catch(() => ''))) await new Promise(resolve => setTimeout(resolve, 50))
  const { files } = createRedisBackend({ client, prefix: 'bench:' })
  const now = Date.now()
  const code = newCode()
  await files.create({ code, blobKey: newBlobKey(), filename: 'f', contentType: 'text/plain', size: 1, sha256: '', maxDownloads: 1_000_000, downloads: 0, createdAt: now, expiresAt: now + 3_600_000, retainUntil: now + 3_600_000 }, now)
  for (const inFlight of [1, 50]) {
    for (const wait of [false, true]) {
      const latencies: number[] = []
      let left = 5000
      const started = performance.now()
      await Promise.all(Array.from({ length: inFlight }, async () => {
        while (left-- > 0) {
          const t = performance.now()
          await files.claim(code, randomBytes(16).toString('base64url'), now, now + 1000)
          if (wait && await client.call('WAIT', '1', '1000') !== 1) throw new Error('the replica did not acknowledge')
          latencies.push(performance.now() - t)
        }
      }))
      latencies.sort((a, b) => a - b)
      const at = (q: number) => latencies[Math.floor(latencies.length * q)]!.toFixed(3)
      console.log(`${wait ? 'WAIT 1 ' : 'no WAIT'}, ${String(inFlight).padStart(2)} in flight: ${(latencies.length / ((performance.now() - started) / 1000)).toFixed(0)} claims/s, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`)
    }
  }
  client.disconnect()
} finally {
  for (const s of servers) s.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
