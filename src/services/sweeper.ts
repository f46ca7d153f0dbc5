/**
 * The sweeper deletes objects whose cleanup deadline has passed: expired files (deadline =
 * expiry + SWEEP_GRACE), deleted files whose object could not be removed at once, and uploads
 * abandoned mid-way (deadline = start + UPLOAD_TIMEOUT). It runs on every instance: each key
 * is leased atomically in the state store before it is worked on, so instances never do the
 * same work twice, and a lease left by a crashed instance runs out and is taken again.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { BlobStore } from '../blob/index.js'
import type { Metrics } from '../metrics.js'
import type { StateStore } from '../state/index.js'

export interface SweeperOptions {
  blobs: BlobStore
  state: StateStore
  log: FastifyBaseLogger
  metrics: Metrics
  /** Epoch ms. */
  now: () => number
  /** ms between sweeps; 0 = no timer. */
  intervalMs: number
  /** Keys leased per round trip. */
  batchSize?: number
  /** ms a lease lasts before another instance may retry the key. */
  leaseMs?: number
}

export interface SweepResult {
  deleted: number
  failed: number
}

export type Sweeper = ReturnType<typeof createSweeper>

export function createSweeper (opts: SweeperOptions) {
  const { blobs, state, log, now } = opts
  const batchSize = opts.batchSize ?? 100
  const leaseMs = opts.leaseMs ?? 5 * 60_000
  let timer: NodeJS.Timeout | undefined
  let running: Promise<SweepResult> | undefined

  async function sweep (): Promise<SweepResult> {
    const result = { deleted: 0, failed: 0 }
    while (true) {
      const at = now()
      const keys = await state.leaseDueBlobs(at, batchSize, at + leaseMs)
      for (const key of keys) {
        try {
          await blobs.purge(key)
          await state.forgetBlob(key)
          result.deleted++
        } catch (err) {
          result.failed++
          log.warn({ err, blobKey: key }, 'sweeper could not delete object; retrying after the lease')
        }
      }
      if (keys.length < batchSize || result.failed > 0) break
    }
    if (result.deleted + result.failed > 0) log.info(result, 'sweep finished')
    opts.metrics.sweep(result.deleted, result.failed)
    return result
  }

  return {
    /** One full sweep; concurrent calls share the sweep in progress. */
    sweepOnce (): Promise<SweepResult> {
      running ??= sweep().finally(() => { running = undefined })
      return running
    },
    start () {
      if (opts.intervalMs <= 0 || timer !== undefined) return
      timer = setInterval(() => {
        this.sweepOnce().catch(err => log.warn({ err }, 'sweep failed'))
      }, opts.intervalMs)
      timer.unref()
    },
    async stop () {
      clearInterval(timer)
      timer = undefined
      await running?.catch(() => {})
    }
  }
}
