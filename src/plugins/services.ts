/** Domain services built on the stores: files, chunked sessions, and the background sweeper. */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'

/** The settings the services read. */
type ServiceSettings = Pick<Config, 'limits' | 'sweeper' | 'uploadTimeoutMs' | 'downloadResumeMs' | 'sessionTtlMs' | 'chunkLockMs'>
import { createFileService, type FileService } from '../services/files.js'
import { InFlight } from '../services/in-flight.js'
import { createQuota, type Quota } from '../services/quota.js'
import { createRefundQueue } from '../services/refunds.js'
import { createSessionService, type SessionService } from '../services/sessions.js'
import { createSweeper, type Sweeper } from '../services/sweeper.js'

declare module 'fastify' {
  interface FastifyInstance {
    files: FileService
    sessions: SessionService
    sweeper: Sweeper
    quota: Quota
  }
}

export default fp(async function services (app: FastifyInstance, opts: { config: ServiceSettings, now: () => number }) {
  const { config, now } = opts
  const inFlight = new InFlight()
  const { blobs, state } = app
  const quota = createQuota({ keys: state.keys, log: app.log.child({ component: 'quota' }), now, uploadTimeoutMs: config.uploadTimeoutMs })
  app.decorate('quota', quota)
  const refunds = createRefundQueue({ files: state.files, log: app.log.child({ component: 'refunds' }), metrics: app.metrics, now })
  const files = createFileService({
    blobs,
    files: state.files,
    cleanup: state.cleanup,
    log: app.log,
    metrics: app.metrics,
    inFlight,
    refunds,
    quota,
    now,
    maxFileSize: config.limits.maxFileSize,
    graceMs: config.sweeper.graceMs,
    uploadTimeoutMs: config.uploadTimeoutMs,
    resumeMs: config.downloadResumeMs
  })
  app.decorate('files', files)
  app.decorate('sessions', createSessionService({
    blobs,
    sessions: state.sessions,
    cleanup: state.cleanup,
    files,
    quota,
    log: app.log,
    metrics: app.metrics,
    inFlight,
    now,
    maxChunkSize: config.limits.maxChunkSize,
    sessionTtlMs: config.sessionTtlMs,
    graceMs: config.sweeper.graceMs,
    chunkLockMs: config.chunkLockMs
  }))
  const sweeper = createSweeper({ blobs, files: state.files, sessions: state.sessions, cleanup: state.cleanup, log: app.log.child({ component: 'sweeper' }), metrics: app.metrics, now, intervalMs: config.sweeper.intervalMs, tombstoneMs: config.limits.maxExpiryHours * 3_600_000 + config.sweeper.graceMs })
  app.decorate('sweeper', sweeper)
  app.addHook('onReady', async () => sweeper.start())
  // Root-level onClose hooks run in reverse registration order, so this runs before the
  // stores close: cut uploads finish deleting what they stored, queued claim refunds get a
  // last chance, the sweeper stops.
  app.addHook('onClose', async () => {
    await inFlight.drain(10_000)
    await refunds.close(3000) // with inFlight's 10 s, inside server.ts's hard deadline (grace + 15 s)
    await sweeper.stop()
  })
}, { name: 'services', dependencies: ['stores', 'observability'] })
