/**
 * Bounded mixed traffic through a balancer, for tests where instances come and go under it: an
 * open loop starting `rate` requests a second whatever the answers take (uploads of
 * UPLOAD_SIZE bytes by fetch and by curl, downloads and HEADs of one code), plus one chunked
 * session after another. Every request must succeed; each one that does not is recorded with
 * its time, so a failure can be set beside the restarts and the balancer's log.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { API_KEY } from '../../helpers/app.js'
import { post } from '../../helpers/chunks.js'

/** Bytes of each upload. */
export const UPLOAD_SIZE = 100 * 1024
/** Requests allowed in flight before the loop skips one (a machine too slow to keep up). */
const MAX_IN_FLIGHT = 200
/** No single request of this traffic may take longer (ms). */
const REQUEST_TIMEOUT_MS = 60_000

type Kind = 'upload (fetch)' | 'upload (curl)' | 'download' | 'head' | 'session'
/** One cycle of the open loop: a quarter uploads, the rest downloads and HEADs. */
const CYCLE: Kind[] = ['upload (fetch)', 'download', 'head', 'download', 'upload (curl)', 'head', 'download', 'head']

export interface TrafficOptions {
  /** The balancer. */
  url: string
  /** Requests started per second by the open loop (the session loop adds a few). */
  rate: number
  /** A code with a high max_downloads, and its size in bytes. */
  code: string
  size: number
  /** A file of UPLOAD_SIZE bytes, for curl. */
  uploadFile: string
  /** Time origin of the failure records (ms since the epoch). */
  t0: number
}

export interface TrafficReport {
  requests: number
  byKind: Record<string, number>
  /** `+12.3s download: 502`, one per failed request. */
  failures: string[]
  /** Requests the loop did not start because MAX_IN_FLIGHT were running. */
  skipped: number
  seconds: number
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

/** A body in one short line: a balancer's error page by its title (CI prints 300 columns of the diagnostics). */
const brief = (text: string): string => /<title>([^<]*)<\/title>/.exec(text)?.[1] ?? text.slice(0, 200)

async function curlUpload (url: string, file: string): Promise<string | undefined> {
  const child = spawn('curl', ['-sS', '--max-time', String(REQUEST_TIMEOUT_MS / 1000), '-o', '/dev/null', '-w', '%{http_code}', '-H', `X-Client-Key: ${API_KEY}`, '-F', `file=@${file}`, `${url}/upload`], { stdio: ['ignore', 'pipe', 'pipe'] })
  let [stdout, stderr] = ['', '']
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const [code] = await once(child, 'close') as [number]
  return code === 0 && stdout === '200' ? undefined : `curl ${code}, HTTP ${stdout} ${stderr.trim()}`
}

/** undefined when the request succeeded, else what went wrong. */
async function request (kind: Kind, o: TrafficOptions, body: Blob): Promise<string | undefined> {
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  switch (kind) {
    case 'upload (curl)': return await curlUpload(o.url, o.uploadFile)
    case 'upload (fetch)': {
      const fd = new FormData()
      fd.append('file', body, 'traffic.bin')
      const res = await fetch(`${o.url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: fd, signal })
      const text = await res.text()
      return res.status === 200 && (JSON.parse(text) as { size: number }).size === UPLOAD_SIZE ? undefined : `${res.status} ${brief(text)}`
    }
    case 'download': {
      const res = await fetch(`${o.url}/download/${o.code}`, { signal })
      const got = (await res.arrayBuffer()).byteLength
      return res.status === 200 && got === o.size ? undefined : `${res.status}, ${got} bytes`
    }
    default: {
      const res = await fetch(`${o.url}/download/${o.code}`, { method: 'HEAD', signal })
      return res.status === 200 ? undefined : String(res.status)
    }
  }
}

/** Starts the traffic; `stop()` ends it, waits for what is in flight and reports. */
export function startTraffic (o: TrafficOptions): { stop: () => Promise<TrafficReport> } {
  const report: TrafficReport = { requests: 0, byKind: {}, failures: [], skipped: 0, seconds: 0 }
  const body = new Blob([Buffer.alloc(UPLOAD_SIZE, 'r')])
  const inFlight = new Set<Promise<void>>()
  const started = Date.now()
  const stopping = new AbortController()

  const track = (kind: Kind, run: () => Promise<string | undefined>): Promise<boolean> => {
    report.requests++
    report.byKind[kind] = (report.byKind[kind] ?? 0) + 1
    const at = Date.now()
    const done = run().catch((err: Error) => `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}`).then(failure => {
      if (failure !== undefined) report.failures.push(`+${((at - o.t0) / 1000).toFixed(1)}s ${kind}: ${failure}`)
      return failure === undefined
    })
    const settled = done.then(() => {})
    inFlight.add(settled)
    settled.finally(() => inFlight.delete(settled)).catch(() => {})
    return done
  }

  const openLoop = (async () => {
    for (let n = 0; !stopping.signal.aborted; n++) {
      await sleep(Math.max(0, started + n * 1000 / o.rate - Date.now())) // behind schedule: at once (a negative timeout warns)
      if (inFlight.size >= MAX_IN_FLIGHT) { report.skipped++; continue }
      const kind = CYCLE[n % CYCLE.length]!
      track(kind, () => request(kind, o, body)).catch(() => {})
    }
  })()

  // One chunked session after another: start, two chunks, complete.
  const chunk = Buffer.alloc(64 * 1024, 'c')
  const step = async (path: string, fields: Array<[string, string]>, data?: Buffer): Promise<Record<string, unknown> | undefined> => {
    let answer: Record<string, unknown> | undefined
    const ok = await track('session', async () => {
      const res = await post(o.url, path, fields, data)
      answer = res.body
      return res.status === 200 ? undefined : `${path} ${res.status} ${JSON.stringify(res.body)}`
    })
    await sleep(100)
    return ok ? answer : undefined
  }
  const sessions = (async () => {
    while (!stopping.signal.aborted) {
      const start = await step('/upload/start', [['filename', 'session.bin'], ['total_chunks', '2']])
      if (start === undefined) continue
      const id = start.upload_id as string
      if (await step('/upload/chunk', [['upload_id', id], ['chunk_index', '0']], chunk) === undefined) continue
      if (await step('/upload/chunk', [['upload_id', id], ['chunk_index', '1']], chunk) === undefined) continue
      await step('/upload/complete', [['upload_id', id]])
    }
  })()

  return {
    async stop () {
      stopping.abort()
      await Promise.all([openLoop, sessions])
      await Promise.all(inFlight)
      report.seconds = (Date.now() - started) / 1000
      return report
    }
  }
}
