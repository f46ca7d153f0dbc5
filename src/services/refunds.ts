/**
 * Refunds of download claims whose outcome is unknown. A claim that failed with a state error
 * (a timeout, a lost connection) may still run: the script was sent, and Redis runs it when it
 * answers again (a paused server, a slow failover). Such a request was answered 503 and served
 * nothing, so its claim id is refunded as soon as the state store answers. The store's refund is
 * idempotent and order-proof (a refund that arrives before its claim leaves a tombstone that makes
 * the late claim take nothing), so retrying until one attempt is acknowledged is safe.
 *
 * The queue is in memory, per instance, and bounded: a crash of the instance loses the refunds
 * still queued (each one a download counted but never served; see docs/crashes.md), a full
 * queue refuses new ones, and a shutdown waits a bounded time for the queue to empty. Every
 * refund given up is logged at error level with the start of its claim id.
 */
import type { FastifyBaseLogger } from 'fastify'
import { maskSecret } from '../core/mask.js'
import type { Metrics } from '../metrics.js'
import type { FileStore } from '../state/index.js'

export interface RefundQueueOptions {
  files: Pick<FileStore, 'refund'>
  log: FastifyBaseLogger
  metrics: Metrics
  /** Epoch ms. */
  now: () => number
  /** Refunds held at once; beyond this a new one is given up (logged). */
  maxPending?: number
  /** ms before the first retry; doubles per failed attempt up to `maxDelayMs`. */
  baseDelayMs?: number
  /** ms between attempts at most. */
  maxDelayMs?: number
}

interface Pending { code: string, claimId: string, since: number }

/**
 * What a log line says about a refund: the first two characters of the code and of the claim
 * id (as in request logs: the code lets anyone download, the claim id resumes a download), which
 * find the claim among the codes with that start (`{p}file:{XY…}:claims`) for an operator who
 * wants to undo it by hand.
 */
const logged = (r: { code: string, claimId: string }) => ({ code: maskSecret(r.code), claimId: maskSecret(r.claimId) })

export type RefundQueue = ReturnType<typeof createRefundQueue>

export function createRefundQueue (opts: RefundQueueOptions) {
  const { files, log, metrics, now } = opts
  const maxPending = opts.maxPending ?? 10_000
  const baseDelay = opts.baseDelayMs ?? 250
  const maxDelay = opts.maxDelayMs ?? 5000
  const queue: Pending[] = []
  let working: Promise<void> | undefined
  let running = false
  let stopped = false
  let wake: (() => void) | undefined
  let timer: NodeJS.Timeout | undefined

  const sleep = (ms: number) => new Promise<void>(resolve => {
    wake = resolve
    timer = setTimeout(resolve, ms)
    timer.unref()
  })

  // One worker, oldest first: while the store does not answer, one attempt per delay is enough
  // (every other refund would fail the same way); once one succeeds the rest follow at once.
  async function work () {
    let delay = baseDelay
    // `running` drops in the same tick as the last check of the queue, so `add` never misses a worker.
    try {
      while (queue.length > 0) {
        if (stopped) break
        const head = queue[0]!
        try {
          await files.refund(head.code, head.claimId, now())
          queue.shift()
          delay = baseDelay
          metrics.claimRefund('refunded', queue.length)
          log.info({ ...logged(head), waitedMs: now() - head.since }, 'refunded a download claim whose outcome was unknown')
        } catch (err) {
          log.warn({ err, pending: queue.length }, 'could not refund a download claim yet; retrying')
          await sleep(delay)
          delay = Math.min(delay * 2, maxDelay)
        }
      }
    } finally {
      running = false
    }
  }

  return {
    /** Queues the refund of `claimId` (its claim may or may not have run). */
    add (code: string, claimId: string): void {
      if (stopped || queue.length >= maxPending) {
        metrics.claimRefund('dropped', queue.length)
        log.error(logged({ code, claimId }), 'refund queue full or closed: a download may stay counted without being served')
        return
      }
      queue.push({ code, claimId, since: now() })
      metrics.claimRefund('queued', queue.length)
      if (!running) {
        running = true
        working = work()
      }
    },

    /** Refunds not yet acknowledged. */
    get pending (): number { return queue.length },

    /**
     * Retries at once, then waits up to `timeoutMs` for the queue to empty; whatever is left is
     * given up and logged (the instance is going away). @returns the refunds given up
     */
    async close (timeoutMs: number): Promise<number> {
      let limit: NodeJS.Timeout | undefined
      if (queue.length > 0) {
        clearTimeout(timer)
        wake?.()
        await Promise.race([working, new Promise(resolve => { limit = setTimeout(resolve, timeoutMs) })])
        clearTimeout(limit)
      }
      stopped = true
      clearTimeout(timer)
      wake?.()
      const left = queue.splice(0)
      for (const r of left) {
        metrics.claimRefund('dropped', 0)
        log.error(logged(r), 'shutting down with an unacknowledged refund: a download may stay counted without being served')
      }
      return left.length
    }
  }
}
