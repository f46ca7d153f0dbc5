/**
 * Prometheus metrics on their own listener (METRICS_HOST:METRICS_PORT, default 127.0.0.1:9464),
 * never on the service port. The figures are an oracle for whoever can read them:
 * `dropcode_download_refusals_total{reason}` tells "unknown" from "expired" or "exhausted" for a
 * single guessed code, and the process metrics show the Node version. A port of its own lets the
 * operator publish the service and keep this to the scraper (loopback by default; the container
 * image listens on every interface of its network, which compose does not publish).
 *
 * A plain node:http server rather than a second Fastify instance: one route, no body, no key.
 * It stays open while the app drains (scrapes show the shutdown) and server.ts closes it with
 * the app. It does not go through the app's overload checks, so scrapes are answered under load.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Registry } from 'prom-client'
import { VERSION, VERSION_HEADER } from '../core/version.js'
import { listenError } from './listen-error.js'

export interface MetricsListener {
  /** The address bound (the port is the one chosen when METRICS_PORT=0). */
  address: AddressInfo
  /** Stops accepting, ends idle connections, and cuts a scrape still running after 1 s. */
  close (): Promise<void>
}

/** ms within which a scrape's request must have arrived (a scraper sends a few headers). */
const REQUEST_TIMEOUT_MS = 10_000
/** ms a running scrape may finish in while the listener closes. */
const CLOSE_GRACE_MS = 1000

/** Listens on `host`:`port`; rejects with a StartupError naming METRICS_HOST/METRICS_PORT. */
export async function startMetricsListener (registry: Registry, where: { host: string, port: number }, log: FastifyBaseLogger): Promise<MetricsListener> {
  const server = http.createServer({ requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: REQUEST_TIMEOUT_MS }, (req, res) => {
    const path = (req.url ?? '').replace(/\?.*$/s, '')
    if (path !== '/metrics') return answer(res, 404, 'Not found: metrics are at /metrics.\n')
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(res, 405, 'Method not allowed.\n', { allow: 'GET, HEAD' })
    registry.metrics().then(text => answer(res, 200, text, { 'content-type': registry.contentType }), (err: unknown) => {
      log.error({ err }, 'metrics could not be collected')
      answer(res, 500, 'Metrics could not be collected.\n')
    })
  })
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(where.port, where.host, () => { server.off('error', reject); resolve() })
    })
  } catch (err) {
    throw listenError(err as NodeJS.ErrnoException, { ...where, hostSetting: 'METRICS_HOST', portSetting: 'METRICS_PORT', unprivileged: 9464, orElse: 'METRICS_PORT=off to serve no metrics' })
  }
  server.on('error', err => log.error({ err }, 'metrics listener failed'))
  let closing: Promise<void> | undefined
  return {
    address: server.address() as AddressInfo,
    close () {
      closing ??= new Promise<void>(resolve => {
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS)
        cut.unref()
        server.close(() => { clearTimeout(cut); resolve() })
        server.closeIdleConnections()
      })
      return closing
    }
  }
}

function answer (res: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', [VERSION_HEADER]: VERSION, ...headers, 'content-length': Buffer.byteLength(body) })
  res.end(res.req.method === 'HEAD' ? undefined : body)
}
