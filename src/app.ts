/**
 * Builds the dropcode application; never listens (server.ts does). Plugins are registered in
 * dependency order, and this list is the architecture:
 *
 *   error handler → stall guard → OpenAPI → multipart parser → stores (BlobStore + StateStore) →
 *   observability (metrics, request logs) → rate limits → services (files, sessions, sweeper) →
 *   routes (health, upload, chunked upload, download, delete)
 */
import { randomUUID } from 'node:crypto'
import proxyAddr from '@fastify/proxy-addr'
import type { S3Client } from '@aws-sdk/client-s3'
import multipart from '@fastify/multipart'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Config } from './config.js'
import { loggerOptions } from './logging.js'
import errorHandler, { clientError, frameworkError } from './plugins/error-handler.js'
import observability from './plugins/observability.js'
import rateLimit from './plugins/rate-limit.js'
import stallGuard from './plugins/stall-guard.js'
import openapi from './plugins/openapi.js'
import services from './plugins/services.js'
import stores from './plugins/stores.js'
import chunkedRoutes from './routes/chunked.js'
import deleteRoutes from './routes/delete.js'
import healthRoutes from './routes/health.js'
import downloadRoutes from './routes/download.js'
import uploadRoutes from './routes/upload.js'

export interface RouteEntry { method: string, url: string, hidden: boolean }

declare module 'fastify' {
  interface FastifyInstance {
    routeTable: RouteEntry[]
  }
}

export interface AppOverrides {
  /** Logger to use; default: pino at config.logLevel. Tests pass `false`-like silent loggers. */
  loggerInstance?: FastifyBaseLogger
  /** Clock in epoch ms (tests move time forward to check expiry). */
  now?: () => number
  /** Use this S3 client (tests wrap it to record or fail requests). */
  s3Client?: S3Client
  /** ms without traffic before a running request is cut (default 2 minutes). */
  stallMs?: number
}

/** TRUST_PROXY as proxy-addr's trust function: (address, hop index) → trusted. */
function trustFunction (setting: Config['trustProxy']): (addr: string, i: number) => boolean {
  if (setting === false) return () => false
  if (typeof setting === 'number') return (_addr, i) => i < setting
  return proxyAddr.compile(setting)
}

export async function buildApp (config: Config, overrides: AppOverrides = {}): Promise<FastifyInstance> {
  const now = overrides.now ?? Date.now
  const trustProxy = trustFunction(config.trustProxy)
  const app = Fastify({
    ...(overrides.loggerInstance ? { loggerInstance: overrides.loggerInstance } : { logger: loggerOptions(config.logLevel) }),
    genReqId: req => {
      const given = req.headers['x-request-id']
      // Taken only from a trusted proxy, and only in a harmless shape.
      if (typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) && trustProxy(req.socket.remoteAddress ?? '', 0)) return given
      return randomUUID()
    },
    trustProxy,
    // One line per request, written by plugins/observability.ts.
    logController: new LogController({ disableRequestLogging: true }),
    // JSON bodies are never accepted; keep the non-multipart limit small.
    bodyLimit: 64 * 1024,
    // Long uploads and downloads: no whole-request deadline (a 1 GiB transfer on a slow link
    // takes long). Stalled requests are cut by plugins/stall-guard.ts instead of fastify's
    // connectionTimeout: any socket timeout keeps close() from ending idle keep-alive
    // connections (measured: shutdown then waits for keepAliveTimeout).
    requestTimeout: 0,
    // Idle keep-alive sockets close after 72 s: longer than the 60 s idle timeout of common load
    // balancers (AWS ALB), so the balancer, not dropcode, closes them and never reuses a socket
    // we are closing.
    keepAliveTimeout: 72_000,
    return503OnClosing: true,
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError
  })

  app.addHook('onSend', async (req, reply) => { reply.header('x-request-id', req.id) })
  // close() ends the connections that are idle when it starts; one whose response was still
  // finishing would otherwise stay open until keepAliveTimeout. End those as they finish.
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  app.addHook('onResponse', async req => { if (closing) req.raw.socket.end() })
  // Every route registered, for the OpenAPI check and operators' tooling.
  const routeTable: RouteEntry[] = []
  app.decorate('routeTable', routeTable)
  app.addHook('onRoute', route => {
    for (const method of [route.method].flat()) routeTable.push({ method, url: route.url, hidden: route.schema?.hide === true })
  })

  await app.register(errorHandler)
  await app.register(stallGuard, overrides.stallMs !== undefined ? { stallMs: overrides.stallMs } : {})
  await app.register(openapi)
  await app.register(multipart, {
    limits: {
      fieldNameSize: 100, // bytes in a field name; ours are short
      fieldSize: 4096, // bytes in a text field: enough for a 255-byte UTF-8 filename or an id
      fields: 16, // text fields per request; the interface uses at most 4
      // bytes; one over the larger limit so SizeLimit sees the overflow and answers 413
      fileSize: Math.max(config.limits.maxFileSize, config.limits.maxChunkSize) + 1,
      files: 2, // a second file must reach our reader so it can answer 400 (TOO_MANY_FILES)
      parts: 24, // fields + files
      headerPairs: 32 // headers per part
    }
  })
  await app.register(stores, { config, now, ...(overrides.s3Client ? { s3Client: overrides.s3Client } : {}) })
  await app.register(observability, { now })
  await app.register(rateLimit, { config })
  await app.register(services, { config, now })
  await app.register(healthRoutes)
  await app.register(uploadRoutes, { config })
  await app.register(chunkedRoutes, { config })
  await app.register(downloadRoutes)
  await app.register(deleteRoutes)
  app.server.headersTimeout = 30_000
  return app
}
