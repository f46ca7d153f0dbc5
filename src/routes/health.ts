/**
 * Health for load balancers: /healthz (liveness: the process answers; no dependencies) and
 * /readyz (the state store and the storage answer within a second; 503 naming the failed one,
 * and 503 as soon as a shutdown starts draining: plugins/lifecycle.ts). Both are cheap enough to poll every second.
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'

const CHECK_TIMEOUT_MS = 1000

const Health = Type.Object({
  status: Type.String(),
  checks: Type.Optional(Type.Record(Type.String(), Type.String()))
})

async function check (probe: () => Promise<void>): Promise<'ok' | 'failing'> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS) })
  try {
    await Promise.race([probe(), timeout])
    return 'ok'
  } catch {
    return 'failing'
  } finally {
    clearTimeout(timer)
  }
}

export default async function healthRoutes (app: FastifyInstance) {
  app.get('/healthz', { config: { alwaysAnswered: true }, schema: { summary: 'Liveness', response: { 200: Health } } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { config: { alwaysAnswered: true }, schema: { summary: 'Readiness: state store and storage reachable', response: { 200: Health, 503: Health } } }, async (req, reply) => {
    // Planned answers, not failures: every shutdown drains (info), shedding is the overload
    // protection working (warn). A store that does not answer stays an error.
    if (app.lifecycle.draining) {
      req.plannedLogLevel = 'info'
      return reply.code(503).send({ status: 'draining' })
    }
    const overloaded = app.overloaded()
    if (overloaded !== undefined) {
      req.plannedLogLevel = 'warn'
      return reply.code(503).send({ status: 'overloaded', checks: { load: overloaded } })
    }
    const [state, storage] = await Promise.all([check(() => app.state.ping()), check(() => app.blobs.ping())])
    const ok = state === 'ok' && storage === 'ok'
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable', checks: { state, storage } })
  })
}
