/**
 * Builds the dropcode application; never listens (server.ts does). Plugins are registered in
 * dependency order, and this list is the architecture:
 *
 *   version header → error handler → lifecycle → CORS (optional) → early answers (100-continue, declared sizes) → stall guard (no-byte and minimum-rate cuts) → OpenAPI →
 *   stores (BlobStore + state) → observability (metrics, request logs) → overload (slots, load shedding) → rate limits → auth →
 *   services (files, sessions, sweeper, quota) → routes (health, [multipart parser → upload, chunked upload], tus, download, delete,
 *   limits, keys API, the CLI file, web page)
 *
 * Hooks that run on every request are callback-style (`done`), not async: an async hook costs a
 * promise and a microtask per request (docs/performance.md, "404 lookups").
 */
import type { S3Client } from '@aws-sdk/client-s3'
import multipart from '@fastify/multipart'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Config } from './config.js'
import { FIELD_NAME_BYTES } from './http/multipart-form.js'
import { serverOptions } from './server/server-options.js'
import { logDestination } from './logging.js'
import auth from './plugins/auth.js'
import cors from './plugins/cors.js'
import earlyAnswers from './plugins/early-answers.js'
import errorHandler from './plugins/error-handler.js'
import lifecycle from './plugins/lifecycle.js'
import observability from './plugins/observability.js'
import openapi from './plugins/openapi.js'
import overload from './plugins/overload.js'
import rateLimit from './plugins/rate-limit.js'
import services from './plugins/services.js'
import stallGuard from './plugins/stall-guard.js'
import stores from './plugins/stores.js'
import versionHeader from './plugins/version-header.js'
import chunkedRoutes from './routes/chunked.js'
import cliRoutes from './routes/cli.js'
import deleteRoutes from './routes/delete.js'
import downloadRoutes from './routes/download.js'
import healthRoutes from './routes/health.js'
import keyRoutes from './routes/keys.js'
import limitsRoutes from './routes/limits.js'
import tusRoutes from './routes/tus.js'
import uploadRoutes from './routes/upload.js'
import webRoutes from './routes/web.js'

export interface AppOverrides {
  /** Logger to use; default: pino at config.logLevel. Tests pass silent loggers. */
  loggerInstance?: FastifyBaseLogger
  /** Clock in epoch ms (tests move time forward to check expiry). */
  now?: () => number
  /** Use this S3 client (tests wrap it to record or fail requests). */
  s3Client?: S3Client
  /** ms without traffic before a running request is cut (default 2 minutes). */
  stallMs?: number
  /** ms within which request headers must arrive (default 30 s). */
  headersTimeoutMs?: number
}

export async function buildApp (config: Config, overrides: AppOverrides = {}): Promise<FastifyInstance> {
  const now = overrides.now ?? Date.now
  const logs = await logDestination(config.logFormat)
  const app = Fastify(serverOptions(config, logs, { loggerInstance: overrides.loggerInstance, headersTimeoutMs: overrides.headersTimeoutMs }))
  try {
    await registerPlugins(app, config, overrides, now)
  } catch (err) {
    // What did open (the state store, S3 clients) closes before the error goes up: the caller
    // exits, and an exit with an LMDB write in flight would hang (see server.ts).
    await app.close().catch(() => {})
    throw err
  }
  return app
}

async function registerPlugins (app: FastifyInstance, config: Config, overrides: AppOverrides, now: () => number): Promise<void> {
  await app.register(versionHeader)
  await app.register(errorHandler, { linger: config.linger })
  await app.register(lifecycle)
  await app.register(cors, { origins: config.corsOrigins })
  await app.register(earlyAnswers)
  await app.register(stallGuard, { minRate: config.minTransferRate, ...(overrides.stallMs !== undefined ? { stallMs: overrides.stallMs } : {}) })
  await app.register(openapi)
  await app.register(stores, { config, now, ...(overrides.s3Client ? { s3Client: overrides.s3Client } : {}) })
  await app.register(observability, { now })
  await app.register(overload, { config })
  await app.register(rateLimit, { config, now })
  await app.register(auth, { config, now })
  await app.register(services, { config, now })
  await app.register(healthRoutes)
  // The multipart parser belongs to the upload routes alone: registered for the whole app, its
  // hooks (three per request, one a 'close' listener) ran on every download and 404 too (issue 21).
  await app.register(async function uploadEndpoints (scope) {
    await scope.register(multipart, { limits: multipartLimits(config) })
    await scope.register(uploadRoutes, { config })
    await scope.register(chunkedRoutes, { config })
  })
  // Any other route ignores a multipart body, as it did when the parser was the whole app's.
  app.addContentTypeParser('multipart/form-data', (_req, _payload, done) => { done(null) })
  await app.register(tusRoutes, { config })
  await app.register(downloadRoutes)
  await app.register(deleteRoutes)
  await app.register(limitsRoutes, { config })
  await app.register(keyRoutes, { now })
  await app.register(cliRoutes)
  await app.register(webRoutes)
}

/** Limits of the multipart parser (@fastify/multipart's busboy options). */
const multipartLimits = (config: Config) => ({
  fieldNameSize: FIELD_NAME_BYTES, // bytes in a field name (urlencoded only: http/multipart-form.ts checks ours)
  fieldSize: 4096, // bytes in a text field: enough for a 255-byte UTF-8 filename or an id
  fields: 16, // text fields per request; the interface uses at most 4
  // bytes; one over the larger limit so the size limit (Sha256Meter) sees the overflow and answers 413
  fileSize: Math.max(config.limits.maxFileSize, config.limits.maxChunkSize) + 1,
  files: 2, // a second file must reach our reader so it can answer 400 (TOO_MANY_FILES)
  parts: 24, // fields + files
  headerPairs: 32 // headers per part
})
