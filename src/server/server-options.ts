/**
 * Fastify's own options for dropcode: request ids, proxy trust, logging, body and connection
 * timeouts. Kept apart from app.ts so that app.ts stays the list of plugins.
 */
import { randomUUID } from 'node:crypto'
import proxyAddr from '@fastify/proxy-addr'
import type { IncomingMessage, Server } from 'node:http'
import { LogController, type FastifyBaseLogger, type FastifyHttpOptions } from 'fastify'
import type { Config } from '../config.js'
import { trustFunction } from '../http/trust-proxy.js'
import { loggerOptions, type LogDestination } from '../logging.js'
import { clientError, frameworkError } from '../plugins/error-handler.js'

/** ms within which a request's headers must have arrived. */
export const HEADERS_TIMEOUT_MS = 30_000

export function serverOptions (config: Pick<Config, 'trustProxy' | 'logLevel'>, logs: LogDestination, overrides: { loggerInstance?: FastifyBaseLogger | undefined, headersTimeoutMs?: number | undefined } = {}): FastifyHttpOptions<Server> {
  const { loggerInstance } = overrides
  const trustProxy = trustFunction(config.trustProxy)
  return {
    ...(loggerInstance ? { loggerInstance } : { logger: loggerOptions(config.logLevel, logs) }),
    genReqId: req => {
      const given = req.headers['x-request-id']
      // Taken only from a trusted proxy, and only in a harmless shape.
      if (typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) && trustProxy(req.socket.remoteAddress ?? '', 0)) return given
      return randomUUID()
    },
    trustProxy,
    // Every line a request logs (its request line, "file uploaded", a warning) names the client,
    // as TRUST_PROXY resolves it, read when the request starts: a cut request's lines are
    // written after its connection closed, when the socket no longer knows the address.
    // `bindings` is built by fastify for this call alone, so it takes the address itself: a copy
    // made by spreading it cost 3 µs a request, six times the child logger (issue 21).
    childLoggerFactory: (logger, bindings, opts, rawReq) => {
      bindings.ip = proxyAddr(rawReq as IncomingMessage, trustProxy)
      return logger.child(bindings, opts)
    },
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
    // Requests arriving on open connections while closing are served (plugins/lifecycle.ts
    // closes those connections as their responses finish), with dropcode's own bodies.
    return503OnClosing: false,
    http: {
      headersTimeout: overrides.headersTimeoutMs ?? HEADERS_TIMEOUT_MS,
      // Node enforces headersTimeout only when it checks its connections, every 30 s by
      // default: headers trickling in were cut after up to a minute (measured: 55.6 s). Checking
      // every second makes the documented bound true to the second.
      connectionsCheckingInterval: 1000
    },
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError
  }
}
