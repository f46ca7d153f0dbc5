/**
 * The real entry point as a user runs it (`npm start` runs dist/server.js, built from src/server.ts): configuration
 * errors, the zero-setup embedded default, and a restart that loses nothing.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import http from 'node:http'
import fsp from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { dataDir, form } from '../../helpers/app.js'
import { root, runToExit, startServer as start, stopServer as stop } from '../../helpers/server-process.js'

const startServer = (env: Record<string, string>) => start(t, env)

t.test('a bad setting stops start-up, naming the variable', async t => {
  const { code, stderr } = await runToExit({ PORT: 'eighty' })
  t.equal(code, 2)
  t.match(stderr, /invalid PORT="eighty"/)
})

t.test('zero setup: the banner shows the admin key kept under DATA_DIR; a restart loses nothing', async t => {
  const dir = dataDir(t)
  const first = await startServer({ DATA_DIR: dir })
  const key = /admin API key \(generated now and kept in (\S+);[^)]*\): (\S+)/.exec(first.stderr())
  t.ok(key, 'the generated key is in the banner')
  t.equal(key?.[1], path.join(dir, 'admin-key'))
  t.equal((await fsp.stat(key![1]!)).mode & 0o777, 0o600, 'kept readable by its owner only')
  const res = await fetch(`${first.url}/upload`, { method: 'POST', headers: { 'x-client-key': key![2]! }, body: form([['file', { data: 'survives' }], ['max_downloads', '2']]) })
  const { code } = await res.json() as { code: string }
  const firstDownload = await fetch(`${first.url}/download/${code}`)
  t.equal(firstDownload.status, 200)
  t.equal(await firstDownload.text(), 'survives')
  t.equal(await stop(first), 0, 'SIGTERM: clean exit')
  const restarted = await startServer({ DATA_DIR: dir })
  t.match(restarted.stderr(), `admin API key (kept in ${key![1]!}`, 'a restart keeps the key')
  t.equal((await fetch(`${restarted.url}/upload`, { method: 'POST', headers: { 'x-client-key': key![2]! }, body: form([['file', { data: 'again' }]]) })).status, 200, 'and it still opens')
  t.equal(await stop(restarted), 0)

  const second = await startServer({ DATA_DIR: dir, API_KEYS: 'fixed-key' })
  t.teardown(() => stop(second))
  const again = await fetch(`${second.url}/download/${code}`)
  t.equal(again.status, 200)
  t.equal(await again.text(), 'survives', 'file and its download count survived the restart')
  t.equal((await fetch(`${second.url}/download/${code}`)).status, 404)
  t.notMatch(second.stderr(), /generated/, 'no key generated when API_KEYS is set')
  t.notOk(JSON.stringify(second.logs).includes('fixed-key'), 'keys are never logged')
  t.notOk(JSON.stringify(second.logs).includes(`/download/${code}`), 'codes are not logged in full')
})

t.test('shutdown is bounded by SHUTDOWN_GRACE_SECONDS even with a stalled download', async t => {
  const server = await startServer({ DATA_DIR: dataDir(t), API_KEYS: 'k', SHUTDOWN_GRACE_SECONDS: '1' })
  const big = new Uint8Array(32 * 1024 * 1024)
  const res = await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': 'k' }, body: form([['file', { data: big }]]) })
  const { code } = await res.json() as { code: string }
  const stalled = await fetch(`${server.url}/download/${code}`) // headers read, body never consumed
  t.equal(stalled.status, 200)
  const t0 = Date.now()
  t.equal(await stop(server), 0)
  const took = Date.now() - t0
  t.ok(took >= 900 && took < 10_000, `stopped after ${took} ms`)
})

t.test('a shutdown during an upload leaves nothing behind', async t => {
  const dir = dataDir(t)
  const server = await startServer({ DATA_DIR: dir, API_KEYS: 'k', SHUTDOWN_GRACE_SECONDS: '1' })
  const { default: http } = await import('node:http')
  const req = http.request(`${server.url}/upload`, {
    method: 'POST',
    headers: { 'x-client-key': 'k', 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(256 * 1024 * 1024) }
  })
  req.on('error', () => {})
  req.write('--x\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\n')
  await new Promise<void>(resolve => req.write(Buffer.alloc(4 * 1024 * 1024), () => resolve()))
  t.equal(await stop(server), 0, 'clean exit after the grace period')
  req.destroy()
  const { readdirSync, existsSync } = await import('node:fs')
  const blobs = path.join(dir, 'blobs')
  const left = existsSync(blobs) ? readdirSync(blobs, { recursive: true, withFileTypes: true }).filter(e => e.isFile()) : []
  t.same(left.map(e => e.name), [], 'no object or partial file')
})

t.test('SIGTERM to `npm start` stops the service (npm_start_leaves_node_running)', async t => {
  const npm = process.env.npm_execpath !== undefined ? [process.execPath, process.env.npm_execpath] : ['npm']
  // --ignore-scripts: not the build first (other test files run servers from dist/ meanwhile)
  const child = spawn(npm[0]!, [...npm.slice(1), 'start', '--silent', '--ignore-scripts'], {
    cwd: root,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '0' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('npm start did not serve in 60 s')), 60_000)
    let out = ''
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString()
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) { clearTimeout(timer); resolve(m[1]!) }
    })
  })
  t.equal((await fetch(`${url}/healthz`)).status, 200)
  const exited = once(child, 'exit')
  child.kill('SIGTERM') // what `docker stop`, systemd or a CI runner sends to the npm process
  await exited
  let refused = false
  for (let i = 0; i < 50 && !refused; i++) {
    try { await fetch(`${url}/healthz`); await new Promise(resolve => setTimeout(resolve, 100)) } catch { refused = true }
  }
  t.ok(refused, 'the node server stopped with npm: nothing listens any more')
})

t.test('the start-up banner says where it serves, with which drivers, and the key, even at LOG_LEVEL=error (banner_hidden_by_log_level)', async t => {
  const dir = dataDir(t)
  const server = await startServer({ DATA_DIR: dir, LOG_LEVEL: 'error' })
  const banner = server.stderr()
  t.match(banner, /^dropcode is serving on 127\.0\.0\.1, port \d+:$/m)
  t.match(banner, /^ {2}metrics: http:\/\/127\.0\.0\.1:\d+\/metrics$/m, 'the metrics listener, on loopback by default')
  t.match(banner, /^ {2}storage: files under .*blobs$/m)
  t.match(banner, /^ {2}state: {3}LMDB under .*state$/m)
  const key = /admin API key \(generated now and kept in \S+; make more with "dropcode keys create"\): (\S+)$/m.exec(banner)?.[1]
  t.ok(key, 'the generated key, though LOG_LEVEL=error')
  const res = await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': key! }, body: form([['file', { data: 'x' }]]) })
  t.equal(res.status, 200, 'and it works')
  t.same(server.logs, [], 'nothing else at LOG_LEVEL=error')
  t.equal(await stop(server), 0)
})

t.test('start-up failures are one readable line with a hint (startup_errors_unreadable)', async t => {
  const { freePort } = await import('../../helpers/ports.js')
  const dir = dataDir(t)
  const redisPort = await freePort()
  const redis = await runToExit({ DATA_DIR: dir, REDIS_URL: `redis://:secret@127.0.0.1:${redisPort}` })
  t.equal(redis.code, 1)
  t.equal(redis.stderr, `dropcode: cannot reach Redis at redis://***@127.0.0.1:${redisPort} (REDIS_URL): ECONNREFUSED (hint: start Redis there, fix REDIS_URL, or unset REDIS_URL and STATE_DRIVER to keep the state under DATA_DIR)\n`, 'names Redis and its URL, hides the password')
  t.equal(redis.stdout, '', 'no log line, no stack trace')

  const s3Port = await freePort()
  const s3 = await runToExit({ DATA_DIR: dir, S3_BUCKET: 'artifacts', S3_ENDPOINT: `http://127.0.0.1:${s3Port}`, S3_ACCESS_KEY_ID: 'a', S3_SECRET_ACCESS_KEY: 'b' })
  t.equal(s3.code, 1)
  t.equal(s3.stderr, `dropcode: S3 bucket "artifacts" at http://127.0.0.1:${s3Port} is not usable: ECONNREFUSED (hint: check S3_ENDPOINT (is the server running and reachable?))\n`)

  const busy = await startServer({ DATA_DIR: dataDir(t), API_KEYS: 'k' })
  const port = new URL(busy.url).port
  const inUse = await runToExit({ DATA_DIR: dataDir(t), PORT: port })
  t.equal(inUse.code, 1)
  t.equal(inUse.stderr, `dropcode: port ${port} on 127.0.0.1 is already in use (PORT) (hint: stop the other server there, or choose another PORT)\n`)
  t.equal(await stop(busy), 0)

  for (const [env, line] of [
    [{ PORT: 'eighty' }, 'dropcode: invalid PORT="eighty": must be a whole number (digits only, no units) from 0 to 65535 (hint: see docs/configuration.md)\n'],
    [{ MAX_FILE_SIZE: '5GB' }, /^dropcode: invalid MAX_FILE_SIZE="5GB": must be a whole number \(digits only, no units\) from 1 to \d+ \(hint/],
    [{ API_KEYS: 'my key' }, /^dropcode: invalid API_KEYS="my key": must be comma-separated keys of printable ASCII without spaces, such as API_KEYS=key-one,key-two/]
  ] as const) {
    const bad = await runToExit({ DATA_DIR: dir, ...env })
    t.equal(bad.code, 2)
    if (typeof line === 'string') t.equal(bad.stderr, line)
    else t.match(bad.stderr, line)
  }
})

t.test('2,000 uploads that connect while the service is stopped are all answered, none reset (listen_backlog_resets)', async t => {
  // Found by the bench: of 2,000 concurrent 1 MiB uploads, 184 got `write ECONNRESET`. With
  // Node's default listen backlog (511) the kernel's queue overflowed, it answered with SYN
  // cookies, and the connections whose cookie failed were reset (nstat TcpExtSyncookiesFailed).
  const server = await startServer({ DATA_DIR: dataDir(t), LOG_LEVEL: 'warn' })
  const { port } = new URL(server.url)
  const body = Buffer.alloc(64 * 1024, 1)
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity })
  t.teardown(() => agent.destroy())
  const outcomes = new Map<string, number>()
  const count = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1)
  process.kill(server.child.pid!, 'SIGSTOP') // nothing is accepted: the burst waits in the kernel
  let sent: Array<Promise<void>> = []
  try {
    sent = Array.from({ length: 2000 }, () => new Promise<void>(resolve => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/upload', agent, headers: { 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(body.length) } }, res => {
        res.resume()
        res.on('end', () => { count(String(res.statusCode)); resolve() })
      })
      req.on('error', (err: NodeJS.ErrnoException) => { count(err.code ?? err.message); resolve() })
      req.end(body)
    }))
    await new Promise(resolve => setTimeout(resolve, 3000))
  } finally {
    process.kill(server.child.pid!, 'SIGCONT')
  }
  await Promise.all(sent)
  t.same(Object.fromEntries(outcomes), { 401: 2000 }, 'every upload answered (401: no key), none reset')
})

t.test('npm run dev (scripts/dev.mjs): builds the page, serves it, and a SIGTERM stops the server it runs too, no watcher left behind', async t => {
  const dir = dataDir(t)
  const child = spawn(process.execPath, ['scripts/dev.mjs'], {
    cwd: root,
    env: { PATH: process.env.PATH, DATA_DIR: dir, API_KEYS: 'k', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: 'off', LOG_LEVEL: 'warn', LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  child.stdout.resume()
  const deadline = Date.now() + 60_000
  let url: string | undefined
  while (url === undefined && Date.now() < deadline) {
    url = /^ {2}(http:\/\/127\.0\.0\.1:\d+)\/$/m.exec(stderr)?.[1]
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  t.ok(url, `the dev server started: ${stderr.slice(0, 300)}`)
  const page = await fetch(`${url!}/`)
  t.equal(page.status, 200, 'the page is served')
  const port = Number(new URL(url!).port)
  child.kill('SIGTERM')
  const [code] = await once(child, 'exit') as [number | null]
  t.equal(code, 0, 'the watcher exits')
  let refused = false
  for (let i = 0; i < 50 && !refused; i++) {
    try { await fetch(`http://127.0.0.1:${port}/healthz`); await new Promise(resolve => setTimeout(resolve, 100)) } catch { refused = true }
  }
  t.ok(refused, 'and the server it ran is gone: nothing listens any more')
})
