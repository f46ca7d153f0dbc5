/**
 * Metrics and request logs. One log line per request, always, written when its response closes
 * (delivered or cut): route, status, duration, the body bytes really moved each way, the client
 * address (on every line of a request: server/server-options.ts), and how it ended (http/request-end.ts); codes, upload ids and claims in URLs masked
 * by logging.ts. The same moment feeds the request-duration histogram. The metrics are served
 * on their own listener (server/metrics-listener.ts, started by server.ts), never on the service
 * port, where /metrics is an unknown route (404).
 *
 * Why the response's 'close' and not fastify's onResponse: onResponse runs on the response's
 * 'finish' only, so a download the client cut, or an upload cut mid-body, wrote no line at all.
 * 'close' fires once per response either way (after 'finish' when there is one). It is a
 * listener on the response, which lives as long as its request: nothing is added to a
 * keep-alive connection per request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { countReceivedBytes } from '../http/received-bytes.js'
import { requestEnd } from '../http/request-end.js'
import { countSentBytes } from '../http/sent-bytes.js'
import { maskUrl, writesAt } from '../logging.js'
import { createMetrics, type Metrics } from '../metrics.js'
import type { DropcodeError } from '../core/errors.js'

/** Levels a planned 5xx answer is logged at instead of error. */
export type PlannedLevel = 'info' | 'warn'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics
    /**
     * Starts this request's log line (it is written when the response closes). The onRequest
     * hook calls it; so does the router's error path, which runs no hooks. Once per request.
     */
    trackRequest (req: FastifyRequest, reply: FastifyReply): void
  }
  interface FastifyRequest {
    /**
     * Set when this request's 5xx answer is planned, not a failure (a drain's /readyz, load
     * shedding): its lines are logged at this level instead of error.
     */
    plannedLogLevel: PlannedLevel | null
    /** Set once its log line is started (trackRequest). */
    tracked: boolean
    /**
     * The catalogue error this request was answered with, named on its log line (error-handler.ts).
     * Undefined on a request the router refused before fastify decorated it.
     */
    answeredError: DropcodeError | null | undefined
  }
}

export default fp(async function observability (app: FastifyInstance, opts: { now: () => number }) {
  const metrics = createMetrics({ dueObjects: () => app.state.cleanup.countDue(opts.now()), uploadMemory: app.blobs.uploadMemory })
  app.decorate('metrics', metrics)
  app.decorateRequest('plannedLogLevel', null)
  app.decorateRequest('tracked', false)
  app.decorateRequest('answeredError', null)

  function trackRequest (req: FastifyRequest, reply: FastifyReply): void {
    if (req.tracked) return
    req.tracked = true
    const res = reply.raw
    const started = performance.now()
    const received = countReceivedBytes(req.raw)
    const sent = countSentBytes(res)
    res.on('close', () => { // once: a response closes once
      const bytesOut = sent()
      const end = requestEnd(res, bytesOut)
      const route = req.routeOptions.url ?? 'unmatched'
      // 0: no answer went out (the connection was cut first).
      const status = res.headersSent ? res.statusCode : 0
      const seconds = (performance.now() - started) / 1000
      metrics.request(req.method, route, status, end, seconds)
      const level = status >= 500 ? req.plannedLogLevel ?? 'error' : end === 'server' ? 'warn' : 'info'
      if (!writesAt(req.log, level)) return // not built for nothing (LOG_LEVEL=warn: 2xx, 4xx)
      const err = req.answeredError
      req.log[level]({
        method: req.method,
        route,
        // A static asset that was served names a file of the page, not a secret.
        url: maskUrl(req.url, route === '/assets/*' && status > 0 && status < 400),
        status,
        end,
        ms: Math.round(seconds * 1000),
        bytesIn: received(),
        bytesOut,
        // The answer's error: its catalogue code, why (a 404's reason), and its message.
        ...(err == null ? {} : { code: err.code, reason: (err as { reason?: string }).reason, error: err.message })
        // and `ip`, which every line of the request carries (server/server-options.ts)
      }, 'request')
    })
  }
  app.decorate('trackRequest', trackRequest)

  app.addHook('onRequest', (req, reply, done) => { trackRequest(req, reply); done() })
  app.addHook('onSend', (req, reply, payload, done) => { reply.header('x-request-id', req.id); done(null, payload) })
}, { name: 'observability', dependencies: ['stores'] })
