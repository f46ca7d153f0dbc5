/**
 * A private redis-server for one test file: started on a free port, owned by the test (so a
 * test can stop and restart it to produce a real outage), killed at the end. It never touches
 * the machine's shared Redis on 6379.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { freePort } from './ports.js'

export interface TestRedis {
  url: string
  port: number
  /** Kills the server (a real outage). */
  stop (): Promise<void>
  /** Starts it again on the same port, empty. */
  start (): Promise<void>
  /** SIGSTOP: connections stay open, commands wait in their sockets (a hung Redis). */
  pause (): void
  /** SIGCONT: the server runs the commands that waited. */
  resume (): void
}

export async function startRedis (): Promise<TestRedis> {
  const port = await freePort()
  let child: ChildProcess | undefined

  const start = async () => {
    if (child !== undefined && child.exitCode === null) return
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], { stdio: 'ignore' })
    const spawnError = once(child, 'error').then(([err]) => { throw err instanceof Error ? err : new Error(String(err)) })
    const deadline = Date.now() + 10_000
    while (true) {
      const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      probe.on('error', () => {}) // refused while the server starts: expected
      try {
        await Promise.race([probe.connect().then(() => probe.ping()), spawnError])
        return
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}: ${String(err)}`)
        await new Promise(resolve => setTimeout(resolve, 20))
      } finally {
        probe.disconnect()
      }
    }
  }
  const stop = async () => {
    const c = child
    child = undefined
    if (c === undefined || c.exitCode !== null) return
    const exited = once(c, 'exit')
    c.kill('SIGKILL')
    await exited
  }
  const signal = (sig: NodeJS.Signals) => {
    if (child === undefined || child.exitCode !== null) throw new Error('redis-server is not running')
    child.kill(sig)
  }
  process.once('exit', () => child?.kill('SIGKILL'))
  await start()
  return { url: `redis://127.0.0.1:${port}`, port, stop, start, pause: () => signal('SIGSTOP'), resume: () => signal('SIGCONT') }
}
