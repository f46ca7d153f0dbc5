/**
 * Exits that happen while the embedded state store has a write in flight
 * (exit_hangs_with_writes_in_flight). process.exit waits for libuv's thread pool, where an
 * lmdb-js write in flight waits for the main thread to run its transaction (lmdb-js #336):
 * before the fix such a process never exited, and went on holding its port and LMDB's write
 * lock, so the other instances on the DATA_DIR could not write either. Found by CI, where a
 * start on a busy port hung for minutes with its start-up housekeeping write in flight.
 *
 * A second writer on the same LMDB environment (test/fixtures/hold-lmdb-write-lock.mjs, as
 * another instance sharing DATA_DIR is) keeps the server's writes waiting, so every round has
 * one in flight when the exit comes; without the fix every round hangs.
 * - a start on a busy port exits 1 with the port message;
 * - an exception nothing catches, under upload traffic, ends the process with exit 1 and a
 *   fatal log line, and a restart still finds every upload that was answered.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { dataDir, form } from '../helpers/app.js'
import { injectCrash, root, serverCommand, startServer, stopServer } from '../helpers/server-process.js'

const ROUNDS = 3
/** Far more than an exit takes (about a second here); a hang is seen as this. */
const EXIT_MS = 20_000

/** Another writer on DATA_DIR's LMDB environment, holding its write lock 300 ms at a time. */
async function anotherWriter (t: Test, dir: string) {
  const env = path.join(dir, 'state', 'lmdb')
  mkdirSync(env, { recursive: true })
  const child = spawn(process.execPath, [path.join(root, 'test/fixtures/hold-lmdb-write-lock.mjs'), env, '300'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => { child.kill('SIGKILL') })
  for await (const line of createInterface({ input: child.stdout! })) if (line === 'holding') break
}

/** Uploads from 16 clients at once until stopped; collects the codes answered 200. */
function uploadTraffic (url: string) {
  const codes: string[] = []
  const stopped = new AbortController()
  const clients = Promise.all(Array.from({ length: 16 }, async (_, i) => {
    while (!stopped.signal.aborted) {
      try {
        const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': 'k' }, body: form([['file', { data: `client ${i}` }]]) })
        const body = await res.json() as { code?: string }
        if (res.status === 200 && body.code !== undefined) codes.push(body.code)
      } catch {
        await sleep(5) // the server went away: keep trying until stopped
      }
    }
  }))
  return { codes, stop: async () => { stopped.abort(); await clients } }
}

/** Resolves with the exit code, or 'hung' (after killing it) if the process did not exit in time. */
async function exitOf (child: ReturnType<typeof spawn>): Promise<number | string> {
  if (child.exitCode !== null) return child.exitCode
  const timer = setTimeout(() => child.kill('SIGKILL'), EXIT_MS)
  const [code, signal] = await once(child, 'exit') as [number | null, string | null]
  clearTimeout(timer)
  return code ?? (signal === 'SIGKILL' ? 'hung' : `signal ${String(signal)}`)
}

t.test('a start on a busy port exits 1 while its first write waits for the lock', async t => {
  const dir = dataDir(t)
  await anotherWriter(t, dir)
  const busy = createServer().listen(0, '127.0.0.1')
  await once(busy, 'listening')
  t.teardown(() => { busy.close() })
  const port = String((busy.address() as AddressInfo).port)
  for (let round = 1; round <= ROUNDS; round++) {
    const [cmd, args] = serverCommand()
    const server = spawn(cmd, args, { cwd: root, env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: port, DATA_DIR: dir, API_KEYS: 'k' }, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    server.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
    t.equal(await exitOf(server), 1, `round ${round}: exits 1`)
    t.equal(stderr, `dropcode: port ${port} on 127.0.0.1 is already in use (PORT) (hint: stop the other server there, or choose another PORT)\n`, `round ${round}: says why`)
  }
})

t.test('an uncaught exception under upload traffic exits 1 with a fatal log line; nothing answered is lost', async t => {
  const dir = dataDir(t)
  await anotherWriter(t, dir)
  const answered: string[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const server = await startServer(t, { DATA_DIR: dir, API_KEYS: 'k' }, { probe: true })
    const traffic = uploadTraffic(server.url)
    while (traffic.codes.length < 10) await sleep(10)
    injectCrash(server)
    t.equal(await exitOf(server.child), 1, `round ${round}: exits 1`)
    await traffic.stop()
    answered.push(...traffic.codes)
    const fatal = server.logs.find(l => l.level === 60)
    t.match(fatal, { msg: /uncaught exception/, err: { message: 'injected by test/fixtures/probe.mjs' } }, `round ${round}: a fatal log line names the error`)
  }

  const after = await startServer(t, { DATA_DIR: dir, API_KEYS: 'k' })
  t.teardown(() => stopServer(after))
  const missing: string[] = []
  for (const code of answered) {
    if ((await fetch(`${after.url}/download/${code}`, { method: 'HEAD' })).status !== 200) missing.push(code)
  }
  t.ok(answered.length >= ROUNDS * 10, `${answered.length} uploads answered before the crashes`)
  t.same(missing, [], 'every answered upload is there after a restart')
})
