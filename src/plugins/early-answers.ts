/**
 * Answering before the body: the cheapest refusal is the one the client learns of before it
 * sends anything.
 *
 * - `Expect: 100-continue` (curl sends it for bodies over 1 MiB). Node answers `100 Continue`
 *   on its own as soon as the headers arrive, inviting the whole body even when the key is
 *   wrong or the declared size is over the limit. Here the expectation is answered only after
 *   the onRequest checks (key, rate limit, body type, declared size) have passed, just before
 *   the body is read; a refused request gets its 401 or 413 at once and the client never sends.
 * - `sizeGuard(bytes)`: an onRequest check of the declared Content-Length, so a chunk that
 *   announces more than the limit is answered 413 before its first byte is read (a whole upload's
 *   is checked against its key's file limit: routes/key-limits.ts).
 */
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { DropcodeError } from '../core/errors.js'

/** Room in a multipart body for boundaries, part headers and the text fields. */
export const MULTIPART_SLACK = 256 * 1024

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest check: a declared Content-Length over `bytes` (plus multipart slack) is refused with `code` (413). */
    sizeGuard (bytes: number, code: 'DROPCODE_FILE_TOO_LARGE' | 'DROPCODE_CHUNK_TOO_LARGE'): onRequestAsyncHookHandler
  }
}

export default fp(async function earlyAnswers (app: FastifyInstance) {
  // With a listener, Node leaves the expectation to us; the request goes through fastify as usual.
  app.server.on('checkContinue', (req, res) => { app.server.emit('request', req, res) })
  app.addHook('preParsing', (req, reply, payload, done) => {
    const expect = req.headers.expect
    if (typeof expect === 'string' && expect.toLowerCase() === '100-continue' && !reply.raw.headersSent) reply.raw.writeContinue()
    done(null, payload)
  })

  app.decorate('sizeGuard', (bytes: number, code: 'DROPCODE_FILE_TOO_LARGE' | 'DROPCODE_CHUNK_TOO_LARGE'): onRequestAsyncHookHandler =>
    async function declaredSize (req) {
      const declared = Number(req.headers['content-length'])
      if (Number.isFinite(declared) && declared > bytes + MULTIPART_SLACK) {
        throw new DropcodeError(code, `The request declares ${declared} bytes; the limit is ${bytes} bytes${code === 'DROPCODE_CHUNK_TOO_LARGE' ? ' per chunk' : ''}.`)
      }
    })
}, { name: 'early-answers' })
