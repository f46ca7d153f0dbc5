/**
 * `Dropcode-Version` on every answer, so that a client can tell the service's answers from
 * those of whatever stands in between (a proxy's own 413, 502 or 504 page): the CLI reports an
 * answer without it as a proxy's (src/cli/http.ts).
 *
 * Set on the reply as the first onRequest hook, so every answer fastify sends for this request
 * carries it, whoever sends it (routes, the error and not-found handlers, early 401/413
 * answers, 503s from overload, static files): fastify hands the reply's headers to writeHead,
 * errors included. Not on the raw response with setHeader, as it was: one header set there
 * sends every answer down Node's slow writeHead, which merges and checks each header twice
 * (2 µs of a 404 with the error page's headers, issue 21). Answers that never reach an
 * onRequest hook add it themselves: router errors (error-handler.ts `frameworkError`, through
 * sendError) and the bytes written straight to the socket for a request Node's parser rejects
 * (`clientError`).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { VERSION, VERSION_HEADER } from '../core/version.js'

export default fp(async function versionHeader (app: FastifyInstance) {
  app.addHook('onRequest', (_req, reply, done) => { reply.header(VERSION_HEADER, VERSION); done() })
}, { name: 'version-header' })
