/**
 * Prometheus metrics (prom-client), one registry per app (no global state, so several apps can
 * live in one process, as in the tests). Services report through the small `Metrics` interface
 * and never touch prom-client themselves. Every metric is listed in the README.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Unavailable } from './core/model.js'

export interface Metrics {
  registry: Registry
  uploaded (kind: 'single' | 'chunked', bytes: number): void
  downloadRefused (reason: Unavailable): void
  /** A claimed download ended: `complete` when every byte was sent. */
  downloadEnded (bytes: number, complete: boolean): void
  /** A cut download was resumed with its claim (counting no download). */
  downloadResumed (): void
  /**
   * A refund of a claim whose outcome was unknown: queued, refunded (acknowledged by the state
   * store) or dropped (given up: queue full or shutting down); `pending` is the queue's length after.
   */
  claimRefund (event: 'queued' | 'refunded' | 'dropped', pending: number): void
  session (event: 'opened' | 'completed'): void
  sweep (deleted: number, failed: number): void
  backendError (backend: 'storage' | 'state'): void
  request (method: string, route: string, status: number, seconds: number): void
}

export function createMetrics (opts: { dueObjects: () => Promise<number> }): Metrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: 'dropcode_' })
  const m = {
    uploads: new Counter({ name: 'dropcode_uploads_total', help: 'Files stored, by upload kind.', labelNames: ['kind'], registers: [registry] }),
    uploadBytes: new Counter({ name: 'dropcode_upload_bytes_total', help: 'Bytes of stored files.', registers: [registry] }),
    downloads: new Counter({ name: 'dropcode_downloads_total', help: 'Claimed downloads by outcome (served: every byte sent; aborted: cut short).', labelNames: ['outcome'], registers: [registry] }),
    refused: new Counter({ name: 'dropcode_download_refusals_total', help: 'Download or HEAD requests answered 404, by reason.', labelNames: ['reason'], registers: [registry] }),
    resumes: new Counter({ name: 'dropcode_download_resumes_total', help: 'Cut downloads resumed with their claim (Range + If-Range), counting no new download.', registers: [registry] }),
    downloadBytes: new Counter({ name: 'dropcode_download_bytes_total', help: 'Bytes sent by downloads.', registers: [registry] }),
    refunds: new Counter({ name: 'dropcode_claim_refunds_total', help: 'Refunds of download claims whose outcome was unknown (state store timeout or lost connection), by event.', labelNames: ['event'], registers: [registry] }),
    refundsPending: new Gauge({ name: 'dropcode_claim_refunds_pending', help: 'Refunds of download claims waiting for the state store on this instance.', registers: [registry] }),
    sessions: new Counter({ name: 'dropcode_chunked_sessions_total', help: 'Chunked sessions by event.', labelNames: ['event'], registers: [registry] }),
    sweeps: new Counter({ name: 'dropcode_sweeper_runs_total', help: 'Sweeps run by this instance.', registers: [registry] }),
    swept: new Counter({ name: 'dropcode_sweeper_objects_total', help: 'Objects the sweeper handled, by result (expired files, deleted files not yet removed, abandoned uploads and sessions).', labelNames: ['result'], registers: [registry] }),
    backendErrors: new Counter({ name: 'dropcode_backend_errors_total', help: 'Requests failed by an unreachable backend.', labelNames: ['backend'], registers: [registry] }),
    duration: new Histogram({
      name: 'dropcode_http_request_duration_seconds',
      help: 'Request duration by route, method and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300],
      registers: [registry]
    })
  }
  // Sweeper lag: objects already past their cleanup deadline, read from the shared state store.
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'dropcode_cleanup_due_objects',
    help: 'Objects past their cleanup deadline and not yet deleted (all instances); should stay near 0.',
    registers: [registry],
    async collect () { this.set(await opts.dueObjects().catch(() => -1)) }
  })

  return {
    registry,
    uploaded (kind, bytes) { m.uploads.inc({ kind }); m.uploadBytes.inc(bytes) },
    downloadRefused (reason) { m.refused.inc({ reason }) },
    downloadResumed () { m.resumes.inc() },
    downloadEnded (bytes, complete) { m.downloads.inc({ outcome: complete ? 'served' : 'aborted' }); m.downloadBytes.inc(bytes) },
    claimRefund (event, pending) { m.refunds.inc({ event }); m.refundsPending.set(pending) },
    session (event) { m.sessions.inc({ event }) },
    sweep (deleted, failed) { m.sweeps.inc(); m.swept.inc({ result: 'deleted' }, deleted); m.swept.inc({ result: 'failed' }, failed) },
    backendError (backend) { m.backendErrors.inc({ backend }) },
    request (method, route, status, seconds) { m.duration.observe({ method, route, status: String(status) }, seconds) }
  }
}
