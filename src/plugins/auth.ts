/**
 * X-Client-Key authentication for the upload endpoints. Runs as an onRequest hook, before any
 * body byte is read. Keys are compared as SHA-256 digests with timingSafeEqual against every
 * configured key (no early exit), so timing reveals neither a key nor which one matched.
 *
 * Decorates the app with `uploadGuards`, the onRequest hooks every upload route takes.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { DropcodeError } from '../core/errors.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hooks of every upload endpoint, in order: the key (401 before anything else), the per-key rate limit, the body type. */
    uploadGuards: onRequestAsyncHookHandler[]
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest()

export function apiKeyGuard (keys: readonly string[]): onRequestAsyncHookHandler {
  const known = keys.map(digest)
  return async function checkApiKey (req) {
    const given = req.headers['x-client-key']
    const presented = digest(typeof given === 'string' ? given : '')
    let match = 0
    for (const k of known) match |= timingSafeEqual(presented, k) ? 1 : 0
    if (match !== 1 || typeof given !== 'string') throw new DropcodeError('DROPCODE_UNAUTHORIZED')
  }
}

// RFC 2046: 1–70 characters from bchars, quoted or (without spaces) bare.
const BOUNDARY = /;\s*boundary=(?:"([0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?])"|([0-9A-Za-z'()+_\-.:=?]{1,70}))\s*(?:;|$)/i

/**
 * Rejects non-multipart bodies before any content-type parser runs (the interface wants 400),
 * and boundaries that RFC 2046 does not allow (the parser would accept them).
 */
export const requireMultipart: onRequestAsyncHookHandler = async function requireMultipart (req) {
  const type = req.headers['content-type'] ?? ''
  if (!/^multipart\/form-data\s*;/i.test(type)) throw new DropcodeError('DROPCODE_NOT_MULTIPART')
  if (!BOUNDARY.test(type)) throw new DropcodeError('DROPCODE_MALFORMED_MULTIPART', 'The multipart boundary is missing or malformed (1–70 characters, RFC 2046).')
}

export default fp(async function auth (app: FastifyInstance, { apiKeys }: { apiKeys: readonly string[] }) {
  app.decorate('uploadGuards', [apiKeyGuard(apiKeys), app.rateLimits.uploads, requireMultipart])
}, { name: 'auth', dependencies: ['rate-limit'] })
