/**
 * A rolling restart of both instances behind each balancer recipe (deploy/nginx.conf,
 * deploy/haproxy.cfg, as written) under steady traffic fails no request (issue 22). Instances
 * keep their ports, so a restarted one comes back at the address the balancer knows, and drain
 * for the default DRAIN_DELAY_SECONDS (5 s). The restart is the operator's: SIGTERM, wait for
 * the exit, start again, and wait until the balancer sends to it again before the next.
 * A long download (a rate-limited curl) running on the first instance when it gets SIGTERM
 * comes back whole.
 *
 * Found here: behind nginx, requests sent just as an instance closed its listener were reset
 * (an upload then is a 502): the service now ends every connection from the start of the drain
 * (src/plugins/lifecycle.ts), and closes its listener only after a quick poll that found no
 * connection waiting (src/http/close-listener.ts; in CI two uploads 300 ms apart were reset).
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { testEnv } from '../../helpers/app.js'
import { startBalancer } from '../../helpers/balancers.js'
import { freePort } from '../../helpers/ports.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { startServer, stopServer, type ServerProcess } from '../../helpers/server-process.js'
import { dataDir } from '../../helpers/tmp.js'
import { until } from '../../helpers/until.js'
import { curl, curlUpload, sha256File, writeFile } from './recipes.js'
import { startTraffic, UPLOAD_SIZE } from './traffic.js'

const MiB = 1024 * 1024
/** Requests a second started by the traffic's open loop (its chunked sessions add ~5). */
const RATE = 35
/**
 * The long download: 16 s at LONG_RATE. The socket buffers between its instance and curl hold
 * a few seconds' worth (a balancer's reused connection to an instance grows to tens of MiB:
 * 24 MiB at 2 MiB/s had left the instance before its listener closed), so the instance is still
 * sending when its listener closes 5 s after SIGTERM.
 */
const LONG = 128 * MiB
const LONG_RATE = '8M'
/** The long download's own client address (TRUST_PROXY names the balancer, 127.0.0.1). */
const LONG_CLIENT = '127.0.0.9'

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** Client addresses holding download slots on `server` (its metrics listener). */
async function downloadHolders (server: ServerProcess): Promise<number> {
  const text = await (await fetch(server.metricsUrl!)).text()
  return Number(/^dropcode_transfer_subjects\{kind="download"\} (\d+)/m.exec(text)?.[1] ?? 0)
}

/**
 * Which instance runs the long download. Every other client is 127.0.0.1, so two addresses
 * holding download slots on one instance settle it; so does holding one throughout ten samples
 * while the other instance was seen with none (on a busy machine the traffic's own downloads
 * hold slots on both most of the time).
 */
async function servingLongDownload (instances: ServerProcess[]): Promise<number> {
  const deadline = Date.now() + 15_000
  while (Date.now() < deadline) {
    const always = instances.map(() => true)
    for (let k = 0; k < 10; k++) {
      const held = await Promise.all(instances.map(downloadHolders))
      if (held.filter(n => n >= 2).length === 1) return held.findIndex(n => n >= 2)
      held.forEach((n, i) => { if (n === 0) always[i] = false })
      await sleep(100)
    }
    if (always.filter(Boolean).length === 1) return always.indexOf(true)
  }
  throw new Error('could not tell which instance runs the long download')
}

/**
 * The balancer's log lines other than the refused connections that a restart is expected to
 * cause (nginx sends each such request to the other instance; HAProxy logs nothing for them).
 */
const unexpected = (log: string) => log.split('\n').filter(line => line.trim() !== '' && !line.includes('connect() failed (111: Connection refused) while connecting to upstream'))

/** Requests an instance answered, health checks aside. */
const served = (server: ServerProcess) => server.logs.filter(l => typeof l.route === 'string' && l.route !== '/readyz').length

for (const kind of ['nginx', 'haproxy'] as const) {
  t.test(`${kind}: a rolling restart of both instances under ~40 requests/s fails no request; a long download spanning a SIGTERM completes whole`, async t => {
    const ports = [await freePort(), await freePort()]
    const env = testEnv(t, 's3+redis', { redis, s3 }, { LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1', DRAIN_DELAY_SECONDS: '5', MAX_DOWNLOADS: '1000000' })
    const start = (i: number) => startServer(t, { ...env, PORT: String(ports[i]) })
    const instances = await Promise.all([start(0), start(1)])
    const lb = await startBalancer(t, kind, ports.map(p => `127.0.0.1:${p}`))
    const dir = dataDir(t)
    const small = writeFile(dir, 'small.bin', UPLOAD_SIZE)
    const shared = await curlUpload(lb.url, small, ['max_downloads=1000000'])
    const longFile = writeFile(dir, 'long.bin', LONG)
    const long = await curlUpload(lb.url, longFile)

    const t0 = Date.now()
    const events: string[] = []
    const note = (what: string) => events.push(`+${((Date.now() - t0) / 1000).toFixed(1)}s ${what}`)
    const traffic = startTraffic({ url: lb.url, rate: RATE, code: shared.code, size: UPLOAD_SIZE, uploadFile: small, t0 })
    await sleep(2000)

    const longOut = path.join(dir, 'long.out')
    const longDownload = curl(['-sS', '-f', '--interface', LONG_CLIENT, '--limit-rate', LONG_RATE, '-o', longOut, `${lb.url}/download/${long.code}`])
    const first = await servingLongDownload(instances)
    note(`long download running on instance ${first + 1}`)
    const longServer = instances[first]!

    for (const i of [first, 1 - first]) {
      note(`SIGTERM to instance ${i + 1}`)
      t.equal(await stopServer(instances[i]!), 0, `instance ${i + 1} exits 0`)
      note(`instance ${i + 1} exited`)
      instances[i] = await start(i)
      const back = Date.now()
      note(`instance ${i + 1} listening again`)
      // The operator's wait before the next: HAProxy marks it up after rise 2 x inter 1 s;
      // nginx (max_fails=0: it never takes an instance out) sends to it as soon as it listens.
      const fresh = instances[i]!
      await until(() => served(fresh) >= 5, 30_000, `${kind} to send to the restarted instance ${i + 1}`)
      note(`${kind} sends to instance ${i + 1} again (${Date.now() - back} ms after it listened)`)
    }
    await sleep(2000)
    const report = await traffic.stop()
    note('traffic stopped')

    const rate = (report.requests / report.seconds).toFixed(1)
    const mix = Object.entries(report.byKind).map(([k, n]) => `${n} ${k}`).join(', ')
    t.comment(`${kind}: ${report.requests} requests in ${report.seconds.toFixed(1)} s (${rate}/s: ${mix}; ${report.skipped} skipped), ${report.failures.length} failed`)
    t.comment(events.join('\n'))
    const errors = instances.concat(longServer).flatMap(s => s.logs.filter(l => Number(l.status) >= 500).map(l => JSON.stringify(l)))
    t.equal(report.failures.length, 0, `${kind}: ${report.failures.length} of ${report.requests} requests failed during the rolling restart`, {
      balancer: unexpected(lb.errors()).slice(0, 10), failures: report.failures.slice(0, 10), instanceErrors: errors.slice(0, 5), events
    })
    t.ok(Object.values(report.byKind).every(n => n > 0) && Object.keys(report.byKind).length === 5, `every kind of request ran (${mix})`)

    const res = await longDownload
    t.equal(res.code, 0, `the long download (${LONG / MiB} MiB at ${LONG_RATE}/s) completes`, { stderr: res.stderr })
    t.equal(fs.statSync(longOut).size, LONG, 'every byte of the long download')
    t.equal(await sha256File(longOut), long.sha256, 'the long download is byte-exact')
    // It was still streaming when its instance closed its listener: the drain did not merely
    // outlast it.
    const closing = longServer.logs.findIndex(l => typeof l.msg === 'string' && l.msg.startsWith('closing the listener'))
    const ended = longServer.logs.findIndex(l => l.ip === LONG_CLIENT && l.route === '/download/:code')
    t.ok(closing >= 0 && ended > closing, `the long download ended after its instance closed its listener (log lines ${closing}, ${ended})`)
    t.equal(longServer.logs[ended]?.status, 200, 'its instance logged it as served (200)')
  })
}
