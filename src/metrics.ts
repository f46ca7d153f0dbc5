/**
 * Prometheus metrics (prom-client), one registry per app (no global state, so several apps can
 * live in one process, as in the tests). Services report through the small `Metrics` interface
 * and never touch prom-client themselves. Every metric is listed in docs/operations.md.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { BlobStore } from './blob/blob-store.js'
import type { Refusal, SlotStats } from './core/fair-slots.js'
import type { RequestEnd, Unavailable } from './core/model.js'

export type TransferKind = 'upload' | 'download'

export interface Metrics {
  registry: Registry
  /** A file was stored, by the key named `keyName`. */
  uploaded (kind: 'single' | 'chunked', bytes: number, keyName?: string): void
  /** A request of key `keyName` was refused by one of its limits (`limit`: its wire name, such as quota_bytes). */
  keyRefused (keyName: string, limit: string): void
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
  session (event: 'opened' | 'completed' | 'terminated'): void
  /**
   * How a completed session's SHA-256 was had: bytes `folded` as the chunks arrived
   * (services/prefix-digest.ts), bytes `read` back at completion, bytes hashed by the driver
   * while `assembled` (its chunks copied into one object).
   */
  sessionDigest (how: 'folded' | 'read' | 'assembled', bytes: number): void
  sweep (deleted: number, failed: number): void
  backendError (backend: 'storage' | 'state'): void
  /** Where the figures of a kind of transfer slots are read at each scrape. */
  watchSlots (kind: TransferKind, read: () => SlotStats): void
  transferRefused (kind: TransferKind, reason: Refusal): void
  /** A request's response closed: `status` 0 when no answer went out; `end` says whether it was delivered or cut, and by whom. */
  request (method: string, route: string, status: number, end: RequestEnd, seconds: number): void
}

export interface MetricsSources {
  /** Objects past their cleanup deadline (all instances). */
  dueObjects: () => Promise<number>
  /** The S3 store's upload memory (blob/s3/parts.ts); absent on fs. */
  uploadMemory?: BlobStore['uploadMemory']
}

/** Key names that get a label of their own, per instance: the label set stays bounded however many keys exist. */
export const KEY_LABELS = 100

export function createMetrics (opts: MetricsSources): Metrics {
  const registry = new Registry()
  const keyNames = new Set<string>()
  const keyLabel = (name: string) => {
    if (keyNames.has(name)) return name
    if (keyNames.size >= KEY_LABELS) return 'other'
    keyNames.add(name)
    return name
  }
  collectDefaultMetrics({ register: registry, prefix: 'dropcode_' })
  const m = {
    uploads: new Counter({ name: 'dropcode_uploads_total', help: 'Files stored, by upload kind.', labelNames: ['kind'], registers: [registry] }),
    keyUploads: new Counter({ name: 'dropcode_key_uploads_total', help: `Files stored, by API key name (the first ${KEY_LABELS} names this instance sees; the rest as "other").`, labelNames: ['key'], registers: [registry] }),
    keyUploadBytes: new Counter({ name: 'dropcode_key_upload_bytes_total', help: 'Bytes of stored files, by API key name (as dropcode_key_uploads_total).', labelNames: ['key'], registers: [registry] }),
    keyRefusals: new Counter({ name: 'dropcode_key_refusals_total', help: 'Requests refused by a limit of their API key (or the service\'s), by key name (as dropcode_key_uploads_total) and limit.', labelNames: ['key', 'limit'], registers: [registry] }),
    uploadBytes: new Counter({ name: 'dropcode_upload_bytes_total', help: 'Bytes of stored files.', registers: [registry] }),
    downloads: new Counter({ name: 'dropcode_downloads_total', help: 'Claimed downloads by outcome (served: every byte sent; aborted: cut short).', labelNames: ['outcome'], registers: [registry] }),
    refused: new Counter({ name: 'dropcode_download_refusals_total', help: 'Download or HEAD requests answered 404, by reason.', labelNames: ['reason'], registers: [registry] }),
    resumes: new Counter({ name: 'dropcode_download_resumes_total', help: 'Cut downloads resumed with their claim (Range + If-Range), counting no new download.', registers: [registry] }),
    downloadBytes: new Counter({ name: 'dropcode_download_bytes_total', help: 'Bytes sent by downloads.', registers: [registry] }),
    refunds: new Counter({ name: 'dropcode_claim_refunds_total', help: 'Refunds of download claims whose outcome was unknown (state store timeout or lost connection), by event.', labelNames: ['event'], registers: [registry] }),
    refundsPending: new Gauge({ name: 'dropcode_claim_refunds_pending', help: 'Refunds of download claims waiting for the state store on this instance.', registers: [registry] }),
    sessionDigestBytes: new Counter({ name: 'dropcode_session_digest_bytes_total', help: 'Bytes of completed chunked sessions by how their SHA-256 was had: folded as the chunks arrived, read back at completion, or hashed while the driver assembled the chunks.', labelNames: ['how'], registers: [registry] }),
    sessions: new Counter({ name: 'dropcode_chunked_sessions_total', help: 'Chunked sessions by event.', labelNames: ['event'], registers: [registry] }),
    sweeps: new Counter({ name: 'dropcode_sweeper_runs_total', help: 'Sweeps run by this instance.', registers: [registry] }),
    swept: new Counter({ name: 'dropcode_sweeper_objects_total', help: 'Objects the sweeper handled, by result (expired files, deleted files not yet removed, abandoned uploads and sessions).', labelNames: ['result'], registers: [registry] }),
    backendErrors: new Counter({ name: 'dropcode_backend_errors_total', help: 'Requests failed by an unreachable backend.', labelNames: ['backend'], registers: [registry] }),
    transferRefusals: new Counter({ name: 'dropcode_transfer_refusals_total', help: 'Transfers answered 503 DROPCODE_BUSY for want of a slot: full (none free) or share (the key or address already holds as many as are free).', labelNames: ['kind', 'reason'], registers: [registry] }),
    duration: new Histogram({
      name: 'dropcode_http_request_duration_seconds',
      help: 'Request duration by route, method, status (0: no answer went out) and end (complete; cut by the client; cut by the server).',
      labelNames: ['method', 'route', 'status', 'end'],
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

  // S3 upload memory (blob/s3/parts.ts): the slab pool every upload buffers its parts in.
  const uploadMemory = opts.uploadMemory
  if (uploadMemory !== undefined) {
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'dropcode_upload_memory_bytes',
      help: 'S3 part memory of this instance (S3_UPLOAD_MEMORY): in_use (buffered by uploads or in flight to S3), promised (set aside for uploads just admitted), allocated (in use or kept for reuse), max.',
      labelNames: ['state'],
      registers: [registry],
      collect () {
        const s = uploadMemory()
        this.set({ state: 'in_use' }, s.bytesInUse)
        this.set({ state: 'promised' }, s.bytesPromised)
        this.set({ state: 'allocated' }, s.bytesAllocated)
        this.set({ state: 'max' }, s.bytesMax)
      }
    })
    // eslint-disable-next-line no-new
    new Gauge({
      name: 'dropcode_upload_memory_waiting',
      help: 'S3 uploads waiting for part memory, by where: at the gate (body not yet read) or mid-upload (for a slab); their clients are slowed by TCP.',
      labelNames: ['where'],
      registers: [registry],
      collect () {
        const s = uploadMemory()
        this.set({ where: 'gate' }, s.uploadsAtGate)
        this.set({ where: 'slab' }, s.streamsWaiting)
      }
    })
  }

  // Transfer slots (core/fair-slots.ts), read when scraped.
  const slots = new Map<TransferKind, () => SlotStats>()
  const slotGauge = (name: string, help: string, labelNames: string[], pick: (s: SlotStats, set: (labels: Record<string, string>, v: number) => void) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      collect () { for (const [kind, read] of slots) pick(read(), (labels, v) => this.set({ kind, ...labels }, v)) }
    })
  slotGauge('dropcode_transfer_slots', 'Transfer slots of this instance, by kind (upload: per API key; download: per client address) and state (used; limit, 0 for none).', ['kind', 'state'], (s, set) => { set({ state: 'used' }, s.used); set({ state: 'limit' }, s.limit) })
  slotGauge('dropcode_transfer_subjects', 'API keys (uploads) or client addresses (downloads) holding transfer slots.', ['kind'], (s, set) => set({}, s.subjects))
  slotGauge('dropcode_transfer_largest_holding', 'Most transfer slots held by one API key (uploads) or client address (downloads); one may take a slot only while it holds fewer than are free.', ['kind'], (s, set) => set({}, s.largest))

  return {
    registry,
    uploaded (kind, bytes, keyName) {
      m.uploads.inc({ kind })
      m.uploadBytes.inc(bytes)
      if (keyName !== undefined) {
        m.keyUploads.inc({ key: keyLabel(keyName) })
        m.keyUploadBytes.inc({ key: keyLabel(keyName) }, bytes)
      }
    },
    keyRefused (keyName, limit) { m.keyRefusals.inc({ key: keyLabel(keyName), limit }) },
    downloadRefused (reason) { m.refused.inc({ reason }) },
    downloadResumed () { m.resumes.inc() },
    downloadEnded (bytes, complete) { m.downloads.inc({ outcome: complete ? 'served' : 'aborted' }); m.downloadBytes.inc(bytes) },
    claimRefund (event, pending) { m.refunds.inc({ event }); m.refundsPending.set(pending) },
    session (event) { m.sessions.inc({ event }) },
    sessionDigest (how, bytes) { m.sessionDigestBytes.inc({ how }, bytes) },
    sweep (deleted, failed) { m.sweeps.inc(); m.swept.inc({ result: 'deleted' }, deleted); m.swept.inc({ result: 'failed' }, failed) },
    backendError (backend) { m.backendErrors.inc({ backend }) },
    watchSlots (kind, read) { slots.set(kind, read) },
    transferRefused (kind, reason) { m.transferRefusals.inc({ kind, reason }) },
    request (method, route, status, end, seconds) { m.duration.observe({ method, route, status: String(status), end }, seconds) }
  }
}
