/**
 * Overload protection for one instance: answer 503 DROPCODE_BUSY with Retry-After (so clients
 * and balancers retry elsewhere or later) instead of running out of memory or time.
 *
 * - Transfer slots (core/fair-slots.ts): at most MAX_CONCURRENT_UPLOADS upload requests
 *   (/upload, /upload/chunk, /upload/complete) and MAX_CONCURRENT_DOWNLOADS downloads (GET
 *   /download) run at once, thousands by default since a slot holds no memory of its own; an API
 *   key (uploads) or a client address (downloads) may take a slot only while it holds fewer
 *   than are left free, so stalled transfers of one key or address never lock out the others. A
 *   request beyond is refused before its body is read; a slot is held until the response is
 *   over (finished or cut).
 * - Load shedding (@fastify/under-pressure): while the event loop lags more than
 *   SHED_EVENT_LOOP_DELAY_MS, or the heap holds more than SHED_HEAP_USED_PERCENT of its limit,
 *   new requests are refused. Health and readiness are always answered: a balancer must still
 *   see the instance (and /readyz says "overloaded"). Metrics have their own listener, outside
 *   these checks.
 */
import v8 from 'node:v8'
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import { FairSlots } from '../core/fair-slots.js'
import type { TransferKind } from '../metrics.js'
import { limitSubject } from './rate-limit.js'

/** Seconds a refused client is asked to wait. */
const RETRY_AFTER_S = 2
declare module 'fastify' {
  interface FastifyContextConfig {
    /** Answered even while the instance sheds load (health, readiness, the OpenAPI document). */
    alwaysAnswered?: boolean
  }
  interface FastifyInstance {
    /** onRequest hooks taking a transfer slot (503 DROPCODE_BUSY when none is free). */
    transferSlots: { upload: onRequestHookHandler, download: onRequestHookHandler }
    /** Why the instance sheds load right now, or undefined. */
    overloaded (): string | undefined
  }
}

function busy (reply: FastifyReply, why: string): DropcodeError {
  // Shedding is the protection working, not a failure: logged at warn, not error.
  reply.request.plannedLogLevel = 'warn'
  reply.header('retry-after', String(RETRY_AFTER_S))
  return new DropcodeError('DROPCODE_BUSY', `The service is busy (${why}); retry in ${RETRY_AFTER_S} s.`, { retry_after: RETRY_AFTER_S })
}

/** The onRequest hook taking a slot of `kind`: per API key for uploads, per client address for downloads. */
function slotHook (app: FastifyInstance, kind: TransferKind, limit: number): onRequestHookHandler {
  const slots = new FairSlots(limit)
  app.metrics.watchSlots(kind, () => slots.stats())
  const what = kind === 'upload' ? 'uploads' : 'downloads'
  return function takeSlot (req, reply, done) {
    const got = slots.take(kind === 'upload' ? `key ${req.keyId}` : limitSubject(req.ip))
    if (typeof got === 'function') {
      reply.raw.on('close', got) // once: a response closes once
      done()
      return
    }
    app.metrics.transferRefused(kind, got)
    done(busy(reply, got === 'full'
      ? `${limit} ${what} are running`
      : `your ${kind === 'upload' ? 'API key' : 'address'} holds as many ${what} as are left free`))
  }
}

export default fp(async function overload (app: FastifyInstance, { config }: { config: Pick<Config, 'overload'> }) {
  const { maxUploads, maxDownloads, eventLoopDelayMs, heapUsedPercent } = config.overload
  app.decorate('transferSlots', { upload: slotHook(app, 'upload', maxUploads), download: slotHook(app, 'download', maxDownloads) })

  const maxHeapUsedBytes = heapUsedPercent === 0 ? 0 : Math.floor(v8.getHeapStatistics().heap_size_limit * heapUsedPercent / 100)
  await app.register(underPressure, {
    maxEventLoopDelay: eventLoopDelayMs,
    maxHeapUsedBytes,
    pressureHandler: async (req, reply, type) => {
      if (req.routeOptions.config?.alwaysAnswered === true) return
      throw busy(reply, type === 'eventLoopDelay' ? 'the event loop lags' : 'memory is short')
    }
  })
  app.decorate('overloaded', () => {
    if (!app.isUnderPressure()) return undefined
    const { eventLoopDelay, heapUsed } = app.memoryUsage()
    return eventLoopDelayMs > 0 && eventLoopDelay > eventLoopDelayMs ? 'event loop delay' : heapUsed > maxHeapUsedBytes ? 'heap' : 'pressure'
  })
}, { name: 'overload', dependencies: ['observability'] })
