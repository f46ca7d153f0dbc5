/**
 * X-Client-Key authentication for the upload endpoints. Runs as an onRequest hook, before any
 * body byte is read. Keys are compared as SHA-256 digests with timingSafeEqual against every
 * configured key (no early exit), so timing reveals neither a key nor which one matched.
 *
 * Decorates the app with `uploadGuards`, the onRequest hooks every upload route takes, and each
 * authenticated request with `keyId`: the identity of its key, which owns what the request opens
 * (chunked sessions). It is derived here and nowhere else, and never is the key: state may hold
 * it, logs may show it. (Once keys are data with names, the name becomes the identity, so a
 * rotated key keeps its sessions.)
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
  interface FastifyRequest {
    /** The identity of the request's API key (set by the key check; '' before it). */
    keyId: string
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest()

/**
 * The identity of an API key: 128 bits of a domain-separated SHA-256 of it, base64url (22
 * characters, safe in Redis key names). One-way, so a copy of the state does not give the key.
 */
export const keyIdOf = (key: string) => createHash('sha256').update(`dropcode key id\0${key}`).digest().subarray(0, 16).toString('base64url')

export function apiKeyGuard (keys: readonly string[]): onRequestAsyncHookHandler {
  const known = keys.map(digest)
  const ids = keys.map(keyIdOf)
  return async function checkApiKey (req) {
    const given = req.headers['x-client-key']
    const presented = digest(typeof given === 'string' ? given : '')
    // Every key is compared (no early exit); `found` is the 1-based index of the match.
    let found = 0
    for (let i = 0; i < known.length; i++) found |= timingSafeEqual(presented, known[i]!) ? i + 1 : 0
    if (found === 0 || typeof given !== 'string') throw new DropcodeError('DROPCODE_UNAUTHORIZED')
    req.keyId = ids[found - 1]!
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
  app.decorateRequest('keyId', '')
  app.decorate('uploadGuards', [apiKeyGuard(apiKeys), app.rateLimits.uploads, requireMultipart])
}, { name: 'auth', dependencies: ['rate-limit'] })
