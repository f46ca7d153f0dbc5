/**
 * Workload 5: small requests, driven by autocannon (keep-alive connections, no pipelining):
 * 1 KiB uploads/s, downloads/s of one 1 KiB file, and 404 lookups/s of a well-formed code that
 * does not exist (a real state lookup) — the 404 rate against a hello-world Fastify route in the
 * same rounds (bar ≥ 0.6), with the log line kept (LOG_LEVEL=info). p99 latencies reported.
 */
import autocannon from 'autocannon'
import { startPeer, startService, type Driver } from './backends.js'
import { addRow, alternate, type Context, KiB, log, notes, ratio, stat } from './lib.js'
import { BENCH_KEY } from './server-process.js'
import { uploadToService } from './w1-upload.js'

const CONNECTIONS = 16

interface Load { rps: number, p99: number }

async function load (what: string, seconds: number, opts: { url: string, method?: 'GET' | 'POST', headers?: Record<string, string>, body?: Buffer, expect: number }): Promise<Load> {
  const result = await autocannon({ url: opts.url, method: opts.method ?? 'GET', headers: opts.headers, body: opts.body, connections: CONNECTIONS, duration: seconds })
  const good = opts.expect === 200 ? result['2xx'] : result.non2xx
  const bad = result.errors + result.timeouts + (opts.expect === 200 ? result.non2xx : result['2xx'])
  if (bad > 0) log(`${what}: ${bad} unexpected answers or errors of ${good + bad} (errors ${result.errors}, timeouts ${result.timeouts}, 2xx ${result['2xx']}, non-2xx ${result.non2xx})`)
  if (bad > good / 100) notes.push(`${what}: ${bad} of ${good + bad} requests failed or were answered unexpectedly`)
  return { rps: good / result.duration, p99: result.latency.p99 }
}

/** A multipart body with one 1 KiB file part. */
function smallForm (): { body: Buffer, type: string } {
  const boundary = 'dropcode-bench-small'
  const file = Buffer.alloc(KiB, 'x')
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="small.txt"\r\nContent-Type: text/plain\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`)
  ])
  return { body, type: `multipart/form-data; boundary=${boundary}` }
}

export async function benchSmall (ctx: Context, drivers: Driver[]): Promise<void> {
  const workload = '5 small requests'
  const seconds = ctx.quick ? 2 : 4
  const hello = await startPeer('bare.ts', ['hello'])
  const form = smallForm()
  for (const driver of drivers) {
    // The request log line is kept (issue 21): written at info, as in production.
    const server = await startService(driver, { LOG_LEVEL: 'info' })
    try {
      const code = await uploadToService(server, KiB, 1_000_000)
      const missing = 'ZZZZZZ'
      if ((await fetch(`${server.url}/download/${missing}`)).status !== 404) throw new Error(`/download/${missing} is not a 404`)
      const p99 = new Map<string, number[]>()
      const keep = (name: string) => (l: Load) => { p99.set(name, [...(p99.get(name) ?? []), l.p99]); return l.rps }
      const samples = await alternate(ctx.rounds, [
        {
          name: 'upload',
          warmUp: () => load('warm-up', 1, { url: `${server.url}/upload`, method: 'POST', headers: { 'x-client-key': BENCH_KEY, 'content-type': form.type }, body: form.body, expect: 200 }),
          run: () => load(`1 KiB uploads ${driver}`, seconds, { url: `${server.url}/upload`, method: 'POST', headers: { 'x-client-key': BENCH_KEY, 'content-type': form.type }, body: form.body, expect: 200 }).then(keep('upload'))
        },
        {
          name: 'download',
          warmUp: () => load('warm-up', 1, { url: `${server.url}/download/${code}`, expect: 200 }),
          run: () => load(`1 KiB downloads ${driver}`, seconds, { url: `${server.url}/download/${code}`, expect: 200 }).then(keep('download'))
        },
        {
          name: '404',
          warmUp: () => load('warm-up', 1, { url: `${server.url}/download/${missing}`, expect: 404 }),
          run: () => load(`404 lookups ${driver}`, seconds, { url: `${server.url}/download/${missing}`, expect: 404 }).then(keep('404'))
        },
        {
          name: 'hello',
          warmUp: () => load('warm-up', 1, { url: `${hello.url}/hello`, expect: 200 }),
          run: () => load('hello-world Fastify', seconds, { url: `${hello.url}/hello`, expect: 200 }).then(keep('hello'))
        }
      ])
      const row = (name: string, label: string) => {
        const latency = stat(p99.get(name)!)
        return addRow(ctx, { workload, name: label, unit: 'req/s', stat: stat(samples.get(name)!), note: `p99 ${latency.median} ms (${latency.min}–${latency.max})`, extra: { p99Ms: latency } })
      }
      row('upload', `dropcode ${driver}: 1 KiB POST /upload`)
      row('download', `dropcode ${driver}: 1 KiB GET /download`)
      const notFound = row('404', `dropcode ${driver}: GET /download of a missing code (404)`)
      const base = row('hello', `hello-world Fastify route (beside ${driver})`)
      ctx.ratios.push(ratio(workload, `404 lookups ${driver} / hello-world Fastify (bar raised by issue 21)`, notFound, base, 0.6))
    } finally {
      await server.stop()
    }
  }
  await hello.stop()
}
