/**
 * The sweeper deletes objects whose cleanup deadline has passed: expired files (deadline =
 * expiry + SWEEP_GRACE), files whose last download ended, deleted files whose object could not
 * be removed at once, abandoned sessions, and uploads abandoned mid-way (deadline = start +
 * UPLOAD_TIMEOUT). It runs on every instance: each key is leased atomically before it is worked
 * on, so instances never do the same work twice, and a crashed instance's lease runs out.
 *
 * Before deleting, it asks the object's owners (the file record, the session) whether they
 * still need it, and if one does, moves the deadline to when that need ends instead. That is
 * what lets every other step touch one record at a time: a deadline that is too early (a crash
 * between publishing a record and moving its object's deadline, say) is harmless.
 *
 * Publishes that were given up (owner `x:CODE`: the request failed, or the lease found the
 * publish still pending at its deadline, see FileService.publish) are resolved here: the record
 * under CODE, if it points at this object, is retracted first (with a tombstone against a create
 * that runs even later), so the object is never deleted under a record. That is what makes a
 * publish whose commands ran late in a paused Redis converge within one sweep of the wake-up,
 * and a publish cut by a crash within one sweep of its deadline.
 */
import type { FastifyBaseLogger } from 'fastify'
import type { BlobStore } from '../blob/index.js'
import type { Metrics } from '../metrics.js'
import type { Owner } from '../core/model.js'
import type { CleanupIndex, FileStore, SessionRecords } from '../state/index.js'

export interface SweeperOptions {
  blobs: BlobStore
  files: FileStore
  sessions: Pick<SessionRecords, 'objectNeededUntil'>
  cleanup: CleanupIndex
  log: FastifyBaseLogger
  metrics: Metrics
  /** Epoch ms. */
  now: () => number
  /** ms between sweeps; 0 = no timer. */
  intervalMs: number
  /** Keys leased per round trip. */
  batchSize?: number
  /**
   * ms a retracted code stays taken (its tombstone): at least the longest retention a record
   * can have (MAX_EXPIRY_HOURS + SWEEP_GRACE_SECONDS), so a create that runs later than that
   * expires as it lands.
   */
  tombstoneMs: number
  /** ms a lease lasts before another instance may retry the key. */
  leaseMs?: number
}

export interface SweepResult {
  deleted: number
  failed: number
}

export type Sweeper = ReturnType<typeof createSweeper>

export function createSweeper (opts: SweeperOptions) {
  const { blobs, files, sessions, cleanup, log, now } = opts

  /** Until when any owner still needs the object, or null. */
  async function neededUntil (blobKey: string, owners: Owner[], at: number): Promise<number | null> {
    let until: number | null = null
    for (const owner of owners) {
      const id = owner.slice(2)
      if (owner.startsWith('x:')) {
        await files.retract(id, blobKey, at + opts.tombstoneMs, at)
        continue
      }
      if (owner.startsWith('p:')) continue // only a lease gives them out, as x:
      const need = owner.startsWith('f:') ? await files.objectNeededUntil(id, blobKey, at) : await sessions.objectNeededUntil(id, at)
      if (need !== null && (until === null || need > until)) until = need
    }
    return until
  }
  const batchSize = opts.batchSize ?? 100
  const leaseMs = opts.leaseMs ?? 5 * 60_000
  let timer: NodeJS.Timeout | undefined
  let running: Promise<SweepResult> | undefined

  async function sweep (): Promise<SweepResult> {
    const result = { deleted: 0, failed: 0 }
    while (true) {
      const at = now()
      // A jitter keeps two sweepers' leases apart, so that `release` undoes only this one's (were
      // two to meet, two sweepers could work on a key at once: harmless, each step is idempotent).
      const leaseUntil = at + leaseMs + Math.floor(Math.random() * 1000)
      const due = await cleanup.lease(at, batchSize, leaseUntil).catch(async err => {
        // The lease may still run (a paused Redis runs it when it wakes up) and would hold its
        // keys for the whole lease with nobody working on them: undo it, in order after it.
        await cleanup.release(leaseUntil, at).catch(() => {})
        throw err
      })
      for (const { blobKey: key, owners } of due) {
        try {
          const needed = await neededUntil(key, owners, at)
          if (needed !== null) {
            await cleanup.schedule(key, needed)
            continue
          }
          await blobs.purge(key)
          await cleanup.forget(key)
          result.deleted++
        } catch (err) {
          result.failed++
          log.warn({ err, blobKey: key }, 'sweeper could not delete object; retrying after the lease')
        }
      }
      if (due.length < batchSize || result.failed > 0) break
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
