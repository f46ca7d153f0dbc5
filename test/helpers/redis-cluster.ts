/**
 * A private 3-master Redis Cluster for one test file, on loopback: three (or, with a replica
 * each, six) `redis-server --cluster-enabled yes` on free ports (each with a free cluster-bus
 * port), joined by `redis-cli --cluster create … --cluster-replicas N`, ready once every node reports
 * cluster_state:ok. The servers are ours: stopped by their pids, their directory removed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { freePort } from './ports.js'
import { untilOk } from './until.js'

const run = promisify(execFile)
const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null

export interface TestRedisCluster {
  /** host:port of every node, as REDIS_CLUSTER_NODES wants them. */
  nodes: string
  ports: number[]
  password: string | undefined
  /** Environment selecting this cluster (the caller adds REDIS_PREFIX). */
  env (): Record<string, string>
  /** kill -9 of the node on `port` (without replicas, the cluster is not usable afterwards). */
  killNode (port: number): Promise<void>
  /** Resolves once every replica has applied everything its master had written when called. */
  replicated (): Promise<void>
  /** CLUSTER NODES as a node still running sees it (for a failure to say). */
  table (): Promise<string>
  stop (): Promise<void>
}

/** @param opts.replicas replicas per master (default 0: three nodes; 1: six) */
export async function startRedisCluster (opts: { password?: string, replicas?: number } = {}): Promise<TestRedisCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-redis-cluster-'))
  const ports: number[] = []
  const buses: number[] = []
  const children: ChildProcess[] = []
  const auth = opts.password !== undefined ? ['--requirepass', opts.password, '--masterauth', opts.password] : []
  const kill = async (c: ChildProcess) => {
    if (!alive(c)) return
    const exited = new Promise(resolve => c.once('exit', resolve))
    c.kill('SIGKILL')
    await exited
  }
  const stop = async () => {
    await Promise.all(children.map(kill))
    fs.rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', () => { for (const c of children) c.kill('SIGKILL') })
  try {
    const replicas = opts.replicas ?? 0
    const taken = new Set<number>()
    const unusedPort = async () => {
      for (;;) {
        const port = await freePort()
        if (!taken.has(port)) { taken.add(port); return port }
      }
    }
    /**
     * Starts node `i` on free ports. A free port can be taken between the probe and the bind
     * (another test file's server): a node that exits before it answers PING is started again
     * on other ports (CI once saw one node never answer for 15 s).
     */
    const startNode = async (i: number) => {
      for (let attempt = 1; ; attempt++) {
        const [port, bus] = [await unusedPort(), await unusedPort()]
        const child = spawn('redis-server', [
          '--port', String(port), '--cluster-port', String(bus), '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', '2000', '--dir', dir, '--dbfilename', `dump-${port}.rdb`, '--save', '', '--appendonly', 'no', '--loglevel', 'warning', ...auth
        ], { stdio: ['ignore', 'pipe', 'ignore'] })
        let said = ''
        child.stdout!.on('data', (d: Buffer) => { said = (said + d.toString()).slice(-2000) })
        children[i] = child
        ports[i] = port
        buses[i] = bus
        const exited = new Promise<boolean>(resolve => child.once('exit', () => resolve(true)))
        const ready = until(() => probe(port, opts.password, 'PING'), `redis-server on ${port}`).then(() => false)
        ready.catch(() => {}) // (when the exit came first)
        if (!await Promise.race([ready, exited])) return
        if (attempt === 3) throw new Error(`redis-server exited before it answered, 3 times; the last, on ${port}, said: ${said.trim()}`)
      }
    }
    await Promise.all(Array.from({ length: 3 * (1 + replicas) }, (_, i) => startNode(i)))
    await run('redis-cli', [...(opts.password !== undefined ? ['-a', opts.password, '--no-auth-warning'] : []),
      '--cluster', 'create', ...ports.map(p => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'])
    const joined = Date.now()
    let met = 0
    await Promise.all(ports.map(port => until(async () => {
      const info = await probe(port, opts.password, 'CLUSTER', 'INFO')
      if (!info.includes(`cluster_known_nodes:${ports.length}`)) {
        // Gossip lost a node: one node knew only 2 of 3 after 15 s in a CI run on a loaded
        // machine. Meeting a node again is harmless, and joins one that was missed (asked
        // after 3 s, and then every 3 s).
        if (Date.now() - joined < 3000 || Date.now() - met < 3000) throw new Error(info)
        met = Date.now()
        await Promise.all(ports.filter(p => p !== port).map(p => probe(port, opts.password, 'CLUSTER', 'MEET', '127.0.0.1', String(p), String(buses[ports.indexOf(p)]))))
        throw new Error(info)
      }
      if (!/cluster_state:ok/.test(info)) throw new Error(info)
      // Replicas are attached after the slots are assigned: wait until every node sees them all.
      const roles = (await probe(port, opts.password, 'CLUSTER', 'NODES')).split('\n').filter(l => /[ ,]slave /.test(l)).length
      if (roles !== 3 * replicas) throw new Error(`${roles} replicas known`)
      // A replica that never finished its first sync refuses to take over (its data is too old).
      const repl = await probe(port, opts.password, 'INFO', 'replication')
      if (/role:slave/.test(repl) && !/master_link_status:up/.test(repl)) throw new Error('replica not in sync')
    }, `cluster_state:ok on ${port}`, 30_000)))
  } catch (err) {
    await stop()
    throw err
  }
  const nodes = ports.map(p => `127.0.0.1:${p}`).join(',')
  return {
    nodes,
    ports,
    password: opts.password,
    killNode: port => kill(children[ports.indexOf(port)]!),
    async replicated () {
      // Replication is asynchronous: each replica's own offset must reach its master's.
      const running = ports.filter((_, i) => alive(children[i]!))
      for (const port of running) {
        const info = await probe(port, opts.password, 'INFO', 'replication')
        if (!/role:master/.test(info)) continue
        const target = Number(/master_repl_offset:(\d+)/.exec(info)?.[1] ?? 0)
        for (const [, replica] of info.matchAll(/slave\d+:ip=[^,]+,port=(\d+)/g)) {
          await until(async () => {
            const applied = Number(/slave_repl_offset:(\d+)/.exec(await probe(Number(replica), opts.password, 'INFO', 'replication'))?.[1] ?? -1)
            if (applied < target) throw new Error(`replica ${replica} of ${port} at offset ${applied}, master at ${target}`)
          }, 'replication', 10_000)
        }
      }
    },
    async table () {
      const port = ports.find((_, i) => alive(children[i]!))
      return port === undefined ? 'no node running' : await probe(port, opts.password, 'CLUSTER', 'NODES')
    },
    env: () => ({ STATE_DRIVER: 'redis', REDIS_CLUSTER_NODES: nodes, ...(opts.password !== undefined ? { REDIS_PASSWORD: opts.password } : {}) }),
    stop
  }
}

/** One command on one node (not through the cluster client). */
async function probe (port: number, password: string | undefined, ...command: string[]): Promise<string> {
  const c = new Redis({ port, host: '127.0.0.1', password, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  c.on('error', () => {}) // refused while the server starts: expected
  try {
    await c.connect()
    return String(await c.call(command[0]!, ...command.slice(1)))
  } finally {
    c.disconnect()
  }
}

const until = (check: () => Promise<unknown>, what: string, ms = 15_000) => untilOk(check, ms, what)
