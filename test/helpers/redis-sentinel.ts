/**
 * A private Redis with a replica and one Sentinel, on loopback, for failover tests: a primary,
 * a replica (`--replicaof`), and a Sentinel (quorum 1) watching them as `mymaster`. Every
 * process is ours, stopped by its pid; the test can pause the replica (SIGSTOP: replication
 * stalls while the primary keeps acknowledging writes), kill the primary, and wait for the
 * Sentinel to promote the replica, or ask the Sentinel for a planned switchover. The replica replicates through a small TCP relay owned by the
 * test, so the test can cut replication (a partition: the primary keeps acknowledging writes
 * that never reach the replica) — pausing the replica would not do, its socket buffer would
 * still deliver them.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import { freePort } from './ports.js'
import { untilOk } from './until.js'

export interface TestRedisSentinel {
  primaryPort: number
  replicaPort: number
  sentinelPort: number
  /** Environment selecting the master through the Sentinel (the caller adds REDIS_PREFIX). */
  env (): Record<string, string>
  /** A direct client to one node (not through the Sentinel). */
  node (port: number): Promise<Redis>
  /** Cuts the replica off the primary (which keeps acknowledging writes) until the test ends. */
  cutReplication (): void
  /** kill -9 of the primary. */
  killPrimary (): Promise<void>
  /** A planned switchover (`SENTINEL FAILOVER`): the replica becomes the master, the primary its replica. */
  switchover (): Promise<void>
  /**
   * The same by hand, as an operator or an orchestrator does it: REPLICAOF NO ONE on the
   * replica, the Sentinel pointed at it, REPLICAOF on the primary. Unlike the Sentinel's own
   * failover nothing disconnects the primary's clients: their writes answer READONLY.
   */
  switchoverByHand (): Promise<void>
  /** Resolves once the Sentinel names the replica as the master (and the replica says so). */
  promoted (ms?: number): Promise<void>
  stop (): Promise<void>
}

export async function startRedisSentinel (): Promise<TestRedisSentinel> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-redis-sentinel-'))
  const [primaryPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()]
  // The replication link: replica → relay → primary.
  const links = new Set<net.Socket>()
  let cut = false
  const relay = net.createServer(socket => {
    if (cut) { socket.destroy(); return }
    const upstream = net.connect(primaryPort, '127.0.0.1')
    for (const s of [socket, upstream]) {
      links.add(s)
      s.on('error', () => {})
      s.on('close', () => { links.delete(s); socket.destroy(); upstream.destroy() })
    }
    socket.pipe(upstream).pipe(socket)
  })
  await new Promise<void>(resolve => relay.listen(0, '127.0.0.1', resolve))
  const relayPort = (relay.address() as net.AddressInfo).port
  const children = new Map<string, ChildProcess>()
  const server = (name: string, args: string[]) => {
    children.set(name, spawn('redis-server', [...args, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning', '--dir', dir], { stdio: 'ignore' }))
  }
  const kill = async (name: string) => {
    const c = children.get(name)
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return
    const exited = new Promise(resolve => c.once('exit', resolve))
    c.kill('SIGKILL')
    await exited
  }
  const stop = async () => {
    await Promise.all([...children.keys()].map(kill))
    for (const l of links) l.destroy()
    relay.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', () => { for (const c of children.values()) c.kill('SIGKILL') })

  const node = async (port: number) => {
    const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    c.on('error', () => {})
    await c.connect()
    return c
  }
  const ask = async (port: number, ...command: string[]) => {
    const c = await node(port)
    try { return await c.call(command[0]!, ...command.slice(1)) } finally { c.disconnect() }
  }
  const until = (check: () => Promise<boolean>, what: string, ms = 15_000) => untilOk(check, ms, what)

  try {
    server('primary', ['--port', String(primaryPort)])
    server('replica', ['--port', String(replicaPort), '--replicaof', '127.0.0.1', String(relayPort)])
    await until(async () => /master_link_status:up/.test(String(await ask(replicaPort, 'INFO', 'replication'))), 'replica in sync')
    const conf = path.join(dir, 'sentinel.conf')
    fs.writeFileSync(conf, [
      `port ${sentinelPort}`, 'bind 127.0.0.1', `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${primaryPort} 1`,
      'sentinel down-after-milliseconds mymaster 1000',
      'sentinel failover-timeout mymaster 5000'
    ].join('\n') + '\n')
    children.set('sentinel', spawn('redis-server', [conf, '--sentinel', '--loglevel', 'warning'], { stdio: 'ignore' }))
    await until(async () => {
      const replicas = await ask(sentinelPort, 'SENTINEL', 'REPLICAS', 'mymaster') as string[][]
      return replicas.some(r => r.includes(String(replicaPort)))
    }, 'the Sentinel knows the replica')
  } catch (err) {
    await stop()
    throw err
  }

  return {
    primaryPort,
    replicaPort,
    sentinelPort,
    env: () => ({ STATE_DRIVER: 'redis', REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`, REDIS_SENTINEL_NAME: 'mymaster' }),
    node,
    cutReplication: () => {
      cut = true
      for (const l of links) l.destroy()
    },
    killPrimary: () => kill('primary'),
    switchoverByHand: async () => {
      await ask(replicaPort, 'REPLICAOF', 'NO', 'ONE')
      await ask(sentinelPort, 'SENTINEL', 'REMOVE', 'mymaster')
      await ask(sentinelPort, 'SENTINEL', 'MONITOR', 'mymaster', '127.0.0.1', String(replicaPort), '1')
      await ask(sentinelPort, 'SENTINEL', 'SET', 'mymaster', 'down-after-milliseconds', '1000', 'failover-timeout', '5000')
      await ask(primaryPort, 'REPLICAOF', '127.0.0.1', String(replicaPort))
    },
    switchover: async () => {
      await ask(sentinelPort, 'SENTINEL', 'FAILOVER', 'mymaster')
      await until(async () => /role:slave/.test(String(await ask(primaryPort, 'INFO', 'replication'))), 'the old primary a replica', 20_000)
    },
    promoted: (ms = 20_000) => until(async () => {
      const [, port] = await ask(sentinelPort, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'mymaster') as [string, string]
      return port === String(replicaPort) && /role:master/.test(String(await ask(replicaPort, 'INFO', 'replication')))
    }, 'the replica promoted', ms),
    stop
  }
}
