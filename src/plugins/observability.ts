/**
 * Metrics and request logs. One log line per request (route, status, bytes, duration; codes,
 * upload ids and claims in URLs masked by logging.ts) and the request-duration histogram. The
 * metrics are served on their own listener (http/metrics-listener.ts, started by server.ts), never
 * on the service port, where /metrics is an unknown route (404).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { maskUrl } from '../logging.js'
import { createMetrics, type Metrics } from '../metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics
  }
}

export default fp(async function observability (app: FastifyInstance, opts: { now: () => number }) {
  const metrics = createMetrics({ dueObjects: () => app.state.cleanup.countDue(opts.now()) })
  app.decorate('metrics', metrics)

  app.addHook('onSend', async (req, reply) => { reply.header('x-request-id', req.id) })
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched'
    const status = reply.statusCode
    metrics.request(req.method, route, status, reply.elapsedTime / 1000)
    const fields = {
      method: req.method,
      route,
      // A static asset that was served names a file of the page, not a secret.
      url: maskUrl(req.url, route === '/assets/*' && status < 400),
      status,
      ms: Math.round(reply.elapsedTime),
      bytesIn: Number(req.headers['content-length'] ?? 0),
      bytesOut: Number(reply.getHeader('content-length') ?? 0),
      ip: req.ip
    }
    if (status >= 500) req.log.error(fields, 'request')
    else req.log.info(fields, 'request')
  })
}, { name: 'observability', dependencies: ['stores'] })
