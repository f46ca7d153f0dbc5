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
import t, { type Test } from 'tap'
import { dataDir, missingCodes, uploadTraffic } from '../../helpers/app.js'
import { exitOf, injectCrash, root, runToExit, startServer, stopServer } from '../../helpers/server-process.js'
import { until } from '../../helpers/until.js'

/** Each round has a write in flight at the exit; without the fix every round hangs (exitOf: 'hung' after 20 s, where an exit takes about a second). */
const ROUNDS = 3

/** Another writer on DATA_DIR's LMDB environment, holding its write lock 300 ms at a time. */
async function anotherWriter (t: Test, dir: string) {
  const env = path.join(dir, 'state', 'lmdb')
  mkdirSync(env, { recursive: true })
  const child = spawn(process.execPath, [path.join(root, 'test/fixtures/hold-lmdb-write-lock.mjs'), env, '300'], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => { child.kill('SIGKILL') })
  for await (const line of createInterface({ input: child.stdout! })) if (line === 'holding') break
}

t.test('a start on a busy port exits 1 while its first write waits for the lock', async t => {
  const dir = dataDir(t)
  await anotherWriter(t, dir)
  const busy = createServer().listen(0, '127.0.0.1')
  await once(busy, 'listening')
  t.teardown(() => { busy.close() })
  const port = String((busy.address() as AddressInfo).port)
  for (let round = 1; round <= ROUNDS; round++) {
    const { code, stderr } = await runToExit({ PORT: port, DATA_DIR: dir, API_KEYS: 'k' })
    t.equal(code, 1, `round ${round}: exits 1`)
    t.equal(stderr, `dropcode: port ${port} on 127.0.0.1 is already in use (PORT) (hint: stop the other server there, or choose another PORT)\n`, `round ${round}: says why`)
  }
})

t.test('an uncaught exception under upload traffic exits 1 with a fatal log line; nothing answered is lost', async t => {
  const dir = dataDir(t)
  await anotherWriter(t, dir)
  const answered: string[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const server = await startServer(t, { DATA_DIR: dir, API_KEYS: 'k' }, { probe: true })
    const traffic = uploadTraffic(server.url, { key: 'k', clients: 16 })
    await until(() => traffic.codes.length >= 10, 20_000, 'ten uploads answered')
    injectCrash(server)
    t.equal(await exitOf(server.child), 1, `round ${round}: exits 1`)
    await traffic.stop()
    answered.push(...traffic.codes)
    const fatal = server.logs.find(l => l.level === 60)
    t.match(fatal, { msg: /uncaught exception/, err: { message: 'injected by test/fixtures/probe.mjs' } }, `round ${round}: a fatal log line names the error`)
  }

  const after = await startServer(t, { DATA_DIR: dir, API_KEYS: 'k' })
  t.teardown(() => stopServer(after))
  t.ok(answered.length >= ROUNDS * 10, `${answered.length} uploads answered before the crashes`)
  t.same(await missingCodes(after.url, answered), [], 'every answered upload is there after a restart')
})
