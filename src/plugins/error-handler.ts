/**
 * One error handler for the whole app. API routes answer the interface's JSON body
 * `{ "error": message, "code": DROPCODE_… }`; routes with `config.htmlErrors` (downloads)
 * answer a small HTML page. 5xx answers carry only the request id; details go to the log.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { DropcodeError, isDropcodeError } from '../core/errors.js'
import { ERROR_HEADER } from '../api/answers.js'
import { VERSION, VERSION_HEADER } from '../core/version.js'
import { errorPage } from '../http/error-page.js'
import { lingerAfterEarlyAnswer, type LingerBounds } from '../http/linger.js'
import { ERROR_PAGE_HEADERS } from '../http/page-security.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Bounds of the lingering close after an early answer (http/linger.ts). */
    lingerBounds: LingerBounds
  }
  interface FastifyRequest {
    /**
     * Set by a route whose protocol wants RFC 9457 problem details (the IETF resumable-upload
     * draft on /files/): the members of the `application/problem+json` body for an error.
     */
    problem: ((err: DropcodeError) => Record<string, unknown>) | null
  }
  interface FastifyContextConfig {
    /** Render errors as an HTML page instead of JSON (download routes). */
    htmlErrors?: boolean
  }
}

/** Anything thrown becomes a catalogue error; unknown failures become DROPCODE_INTERNAL. */
export function toDropcodeError (err: unknown): DropcodeError {
  if (isDropcodeError(err)) return err
  const fe = err as Partial<FastifyError>
  if (fe.validation !== undefined) return new DropcodeError('DROPCODE_INVALID_FIELD', fe.message, undefined, { cause: err })
  if (fe.statusCode === 413) return new DropcodeError('DROPCODE_FILE_TOO_LARGE', undefined, undefined, { cause: err })
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || fe.code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') {
    return new DropcodeError('DROPCODE_NOT_MULTIPART', undefined, undefined, { cause: err })
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new DropcodeError('DROPCODE_BAD_REQUEST', fe.message, undefined, { cause: err })
  }
  return new DropcodeError('DROPCODE_INTERNAL', undefined, undefined, { cause: err })
}

export function sendError (err: DropcodeError, req: FastifyRequest, reply: FastifyReply, html = req.routeOptions.config?.htmlErrors === true) {
  const status = err.statusCode
  req.answeredError = err // named on the request's log line (plugins/observability.ts)
  if (typeof err.details?.limit === 'string' && req.apiKey?.name !== undefined) req.server.metrics.keyRefused(req.apiKey.name, err.details.limit)
  // The code in a header too: a HEAD's answer has no body, and a client must tell "no such
  // file" (DROPCODE_FILE_NOT_FOUND) from "no such endpoint: wrong --url" (DROPCODE_ROUTE_NOT_FOUND).
  reply.header(ERROR_HEADER, err.code)
  // A body we stopped reading (size limit, bad field, key): answer, then read and discard the
  // rest for a bounded time before closing, so the client can read the answer.
  if (!req.raw.complete) {
    reply.header('connection', 'close')
    lingerAfterEarlyAnswer(req.raw, req.server.lingerBounds)
  }
  if (html) {
    const message = status >= 500 ? `${err.message} (request id ${req.id})` : err.message
    return reply.code(status).headers(ERROR_PAGE_HEADERS).send(errorPage(status, message))
  }
  // A catalogue error that says when to retry says it in the header too.
  if (typeof err.details?.retry_after === 'number') reply.header('retry-after', String(err.details.retry_after))
  // (A request of another Fastify instance, the metrics listener's, has no `problem` at all.)
  if (typeof req.problem === 'function') {
    return reply.code(status).type('application/problem+json').send({ ...req.problem(err), ...(status >= 500 ? { request_id: req.id } : {}) })
  }
  return reply.code(status).send({
    error: err.message,
    code: err.code,
    ...err.details,
    ...(status >= 500 ? { request_id: req.id } : {})
  })
}

/**
 * What the error handler does with anything thrown: count a backend failure, log it, answer it.
 * A route may call it itself for the error it expects by the thousand (a download's unknown
 * code): thrown, such a 404 also went through fastify's error path, several µs of each (issue 21).
 * @param html the route's `htmlErrors`, when the route says it (fastify builds a new
 *   `req.routeOptions` object at each read)
 */
export function answerError (raw: unknown, req: FastifyRequest, reply: FastifyReply, html?: boolean) {
  const err = toDropcodeError(raw)
  // Optional: an error while the app is still being built comes before the metrics exist.
  const metrics = req.server.metrics as FastifyInstance['metrics'] | undefined
  if (err.code === 'DROPCODE_STATE_UNAVAILABLE') metrics?.backendError('state')
  if (err.code === 'DROPCODE_STORAGE_UNAVAILABLE') metrics?.backendError('storage')
  // A planned 5xx (load shedding: plugins/overload.ts) is no failure: no stack, not at error.
  // The request's own line names the error (sendError); only a failure adds a line, with its stack.
  if (err.statusCode >= 500 && req.plannedLogLevel === null) req.log.error({ err: err.cause ?? err, code: err.code }, 'request failed')
  return sendError(err, req, reply, html)
}

/** The download error page for a path no route could take. */
const downloadNotFound = (req: FastifyRequest, reply: FastifyReply) =>
  sendError(new DropcodeError('DROPCODE_FILE_NOT_FOUND'), req, reply, true)

/**
 * Errors raised by the router before any route is chosen (an over-long or undecodable path
 * parameter). A bad code in a download or delete path is just an unknown code: 404.
 */
export function frameworkError (raw: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  // No hooks run on this path: set the version header (plugins/version-header.ts) and start
  // the request's log line here.
  reply.header(VERSION_HEADER, VERSION)
  req.server.trackRequest(req, reply)
  const path = req.raw.url ?? ''
  if (path.startsWith('/download/')) return downloadNotFound(req, reply)
  if (path.startsWith('/delete/')) return sendError(new DropcodeError('DROPCODE_FILE_NOT_FOUND'), req, reply, false)
  return sendError(new DropcodeError('DROPCODE_BAD_REQUEST', undefined, undefined, { cause: raw }), req, reply, false)
}

/**
 * Errors Node's HTTP parser raises before fastify sees a request (oversized headers, a broken
 * request line): answered in the catalogue's JSON shape, and the socket closed.
 */
export function clientError (err: Error & { code?: string }, socket: import('node:net').Socket): void {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const e = new DropcodeError(err.code === 'HPE_HEADER_OVERFLOW'
    ? 'DROPCODE_HEADERS_TOO_LARGE'
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'DROPCODE_REQUEST_TIMEOUT' : 'DROPCODE_BAD_REQUEST')
  const body = JSON.stringify({ error: e.message, code: e.code })
  const reason = ({ 431: 'Request Header Fields Too Large', 408: 'Request Timeout' } as Record<number, string>)[e.statusCode] ?? 'Bad Request'
  socket.end(`HTTP/1.1 ${e.statusCode} ${reason}\r\nDropcode-Version: ${VERSION}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
}

export default fp(async function errorHandler (app: FastifyInstance, opts: { linger: LingerBounds }) {
  app.decorate('lingerBounds', opts.linger)
  app.decorateRequest('problem', null)
  app.setErrorHandler(answerError)
  // A download path the router could not match (`/download/%2E%2E`, say) is an unknown code,
  // answered with the download error page.
  app.setNotFoundHandler((req, reply) => req.url.startsWith('/download/')
    ? downloadNotFound(req, reply)
    : sendError(new DropcodeError('DROPCODE_ROUTE_NOT_FOUND'), req, reply))
}, { name: 'error-handler' })
