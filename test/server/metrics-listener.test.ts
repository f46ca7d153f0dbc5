/**
 * Metrics on their own listener (issue 19, "/metrics is not an oracle"). On the service port,
 * without a key, /metrics told "unknown" from "exhausted" or "expired" for a single guessed code
 * and showed the Node version: found with a plain GET against the running service, so pinned the
 * same way, against the real process on both driver pairs. The metrics listener binds its own
 * address (127.0.0.1 unless METRICS_HOST says otherwise), fails to start with one line and a
 * hint, can be turned off, answers while the instance drains and closes with it.
 */
import { once } from 'node:events'
import fs from 'node:fs'
import net from 'node:net'
import t from 'tap'
import { API_KEY, testEnv, upload, type DriverPair } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { exitOf, runToExit, startServer, stopServer } from '../helpers/server-process.js'
import { dataDir } from '../helpers/tmp.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** A metric's value from the Prometheus text (undefined when absent). */
const metric = (text: string, series: string) => text.split('\n').find(l => l.startsWith(`${series} `))?.slice(series.length + 1)

/** TCP ports process `pid` listens on (Linux: its socket inodes matched against /proc/net/tcp{,6}). */
function listeningPorts (pid: number): number[] {
  const inodes = new Set(fs.readdirSync(`/proc/${pid}/fd`).flatMap(fd => {
    try { return [/^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1]] } catch { return [] }
  }).filter(i => i !== undefined))
  return ['tcp', 'tcp6'].flatMap(file => fs.readFileSync(`/proc/${pid}/net/${file}`, 'utf8').split('\n').slice(1))
    .map(line => line.trim().split(/\s+/))
    .filter(cols => cols[3] === '0A' && inodes.has(cols[9]!)) // 0A: LISTEN
    .map(cols => parseInt(cols[1]!.split(':')[1]!, 16))
    .sort((a, b) => a - b)
}

for (const pair of ['fs+local', 's3+redis'] as DriverPair[]) {
  t.test(`${pair}: regression: /metrics on the service port told a guesser why a code was refused (metrics_oracle)`, async t => {
    const server = await startServer(t, testEnv(t, pair, { redis, s3 }, { LOG_LEVEL: 'warn' }))
    const up = await upload(server.url, [['file', { data: 'one download' }], ['max_downloads', '1']])
    await (await fetch(`${server.url}/download/${up.body.code}`)).arrayBuffer()
    await (await fetch(`${server.url}/download/${up.body.code}`)).arrayBuffer() // exhausted
    await (await fetch(`${server.url}/download/ZZZZZZ`)).arrayBuffer() // unknown

    for (const headers of [{}, { 'x-client-key': API_KEY }] as Array<Record<string, string>>) {
      const res = await fetch(`${server.url}/metrics`, { headers })
      const body = await res.text()
      t.equal(res.status, 404, `service port, ${Object.keys(headers).length === 0 ? 'no key' : 'with a key'}: 404`)
      t.same(JSON.parse(body), { error: 'No such endpoint.', code: 'DROPCODE_ROUTE_NOT_FOUND' }, 'our usual 404 for an unknown route')
      t.notMatch(body, /dropcode_|nodejs/, 'no figure of any kind')
    }

    t.match(server.metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 'the banner names the metrics URL, on 127.0.0.1 by default')
    const port = Number(new URL(server.metricsUrl!).port)
    t.not(port, Number(new URL(server.url).port), 'a port of its own')
    t.same(listeningPorts(server.child.pid!), [Number(new URL(server.url).port), port].sort((a, b) => a - b), 'the process listens on exactly these two ports')
    const res = await fetch(server.metricsUrl!)
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
    const text = await res.text()
    t.equal(metric(text, 'dropcode_download_refusals_total{reason="exhausted"}'), '1', 'names and labels as before')
    t.equal(metric(text, 'dropcode_download_refusals_total{reason="unknown"}'), '1')
    t.equal(metric(text, 'dropcode_downloads_total{outcome="served"}'), '1')
    t.ok(Number(metric(text, 'dropcode_process_resident_memory_bytes')) > 0, 'process metrics too')
    t.ok(metric(text, 'dropcode_http_request_duration_seconds_count{method="GET",route="/download/:code",status="404",end="complete"}'), 'the request histogram')

    // The metrics port serves metrics and nothing else.
    const base = new URL(server.metricsUrl!).origin
    for (const path of ['/', '/healthz', `/download/${up.body.code}`, '/metrics/x']) {
      const other = await fetch(`${base}${path}`)
      t.equal(other.status, 404, `metrics port ${path}: 404`)
      await other.arrayBuffer()
    }
    const post = await fetch(server.metricsUrl!, { method: 'POST', body: 'x' })
    t.equal(post.status, 405)
    t.equal(post.headers.get('allow'), 'GET, HEAD')
    await post.arrayBuffer()
    const head = await fetch(server.metricsUrl!, { method: 'HEAD' })
    t.equal(head.status, 200)
    t.equal(await stopServer(server), 0)
  })
}

t.test('METRICS_PORT taken: one line naming METRICS_PORT with a hint, exit 1 (startup_errors_unreadable)', async t => {
  const holder = net.createServer()
  holder.listen(0, '127.0.0.1')
  await once(holder, 'listening')
  t.teardown(() => holder.close())
  const { port } = holder.address() as net.AddressInfo
  const run = await runToExit({ DATA_DIR: dataDir(t), API_KEYS: 'k', PORT: '0', METRICS_PORT: String(port) })
  t.equal(run.code, 1)
  t.equal(run.stderr, `dropcode: port ${port} on 127.0.0.1 is already in use (METRICS_PORT) (hint: stop the other server there, choose another METRICS_PORT, or METRICS_PORT=off to serve no metrics)\n`)
  t.notMatch(run.stdout, /\bat .*\.js:\d+/, 'no stack trace')

  const bad = await runToExit({ DATA_DIR: dataDir(t), API_KEYS: 'k', PORT: '0', METRICS_HOST: '192.0.2.1' })
  t.equal(bad.code, 1)
  t.equal(bad.stderr, 'dropcode: cannot listen on 192.0.2.1 (METRICS_HOST): EADDRNOTAVAIL (hint: use an address of this machine, 127.0.0.1 or 0.0.0.0)\n')
})

t.test('METRICS_PORT=off: no metrics listener at all; the banner says so', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', METRICS_PORT: 'off' })
  t.equal(server.metricsUrl, undefined)
  t.match(server.stderr(), /^ {2}metrics: off \(METRICS_PORT=off\)$/m)
  t.same(listeningPorts(server.child.pid!), [Number(new URL(server.url).port)], 'only the service port')
  t.equal((await fetch(`${server.url}/metrics`)).status, 404)
  t.equal(await stopServer(server), 0)
})

t.test('SIGTERM: metrics are served while the instance drains, then their listener closes with it', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '2' })
  t.equal((await fetch(server.metricsUrl!)).status, 200, 'a scrape; fetch keeps its connection open')
  const started = Date.now()
  server.child.kill('SIGTERM')
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal((await fetch(`${server.url}/readyz`)).status, 503, 'draining')
  const during = await fetch(server.metricsUrl!)
  t.equal(during.status, 200, 'scraped while draining')
  t.match(await during.text(), /dropcode_http_request_duration_seconds_count\{method="GET",route="\/readyz",status="503",end="complete"\}/)
  t.equal(await exitOf(server.child), 0, 'a clean exit, though a scraper keeps a connection open')
  t.ok(Date.now() - started < 2000 + 3000, `exited ${Date.now() - started} ms after SIGTERM (drain 2 s)`)
  await t.rejects(fetch(server.metricsUrl!), 'nothing listens on the metrics port any more')
})
