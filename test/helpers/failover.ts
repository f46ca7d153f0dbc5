/**
 * Two instances behind a Redis Sentinel (a primary, a `--replicaof` replica, one Sentinel), for
 * the failover and switchover tests, and the steps they share.
 */
import type { Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { startApp, testEnv } from './app.js'
import { startRedisSentinel, type TestRedisSentinel } from './redis-sentinel.js'
import type { TestS3 } from './s3.js'

/** A Sentinel setup and two app instances reaching the master through it. */
export async function setup (t: Test, s3: TestS3, extra: Record<string, string> = {}) {
  const sentinel = await startRedisSentinel()
  t.teardown(() => sentinel.stop())
  const env = testEnv(t, 's3+redis', { redisSetup: sentinel, s3 }, extra)
  const a = await startApp(t, loadConfig(env))
  const b = await startApp(t, loadConfig(env))
  return { sentinel, a, b }
}

/** Waits until the primary's writes so far are on the replica. */
export async function replicated (sentinel: TestRedisSentinel) {
  const primary = await sentinel.node(sentinel.primaryPort)
  try {
    if (await primary.call('WAIT', '1', '5000') !== 1) throw new Error('replica did not acknowledge')
  } finally {
    primary.disconnect()
  }
}

/** Pauses replication, runs `lost` (acknowledged by the primary only), then fails over. */
export async function loseWrites (sentinel: TestRedisSentinel, lost: () => Promise<void>) {
  await replicated(sentinel)
  sentinel.cutReplication()
  try {
    await lost()
  } finally {
    await sentinel.killPrimary()
  }
  await sentinel.promoted()
}

/** Retries through the failover's 503s; every answer on the way must be a 503. */
export async function afterFailover<T extends { status: number }> (t: Test, request: () => Promise<T>): Promise<T> {
  const started = Date.now()
  while (true) {
    const res = await request()
    if (res.status !== 503) return res
    if (Date.now() - started > 20_000) throw new Error('still 503 after 20 s')
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

/**
 * Downloads of `code` from each of `urls`, one at a time per URL, until `stop()`: counts the
 * answers by status and keeps the slowest request's ms. After a 503 a client waits 20 ms.
 */
export function downloadTraffic (urls: string[], code: string) {
  const statuses = new Map<number, number>()
  const seen = { slowest: 0 }
  const stopped = new AbortController()
  const running = Promise.all(urls.map(async url => {
    while (!stopped.signal.aborted) {
      const started = Date.now()
      const res = await fetch(`${url}/download/${code}`)
      await res.arrayBuffer()
      seen.slowest = Math.max(seen.slowest, Date.now() - started)
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      if (res.status === 503) await new Promise(resolve => setTimeout(resolve, 20))
    }
  }))
  return { statuses, slowest: () => seen.slowest, stop: async () => { stopped.abort(); await running } }
}
