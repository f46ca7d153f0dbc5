/**
 * What an upload request checks against its key's limits before its body is read (onRequest,
 * after the key check, so a refusal goes out before `100 Continue` invites the body): the
 * declared length against the key's file limit (413), and room in the key's quota, reserved
 * (403 QUOTA_EXCEEDED); and, once its fields are read, max_downloads and expiry_hours against
 * the key's (400), absent ones defaulted within them.
 */
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import { declaredLength } from '../http/multipart-form.js'
import { MULTIPART_SLACK } from '../plugins/early-answers.js'
import { overLimit, whose, type ApiKey } from '../services/keys.js'
import type { Hold } from '../services/quota.js'
import { DEFAULT_EXPIRY_HOURS, DEFAULT_MAX_DOWNLOADS } from './schemas.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's room in its key's quota (set by `reserveRoom`). */
    hold: Hold | null
  }
}

/**
 * onRequest: refuses a request that declares more than its key's file limit (the service's, if
 * lower: a key's never lifts it), then reserves room for its bytes in the key's quota; `maxOf` is
 * the most content the request may carry (the key's file limit, or a chunk's). The reservation is
 * released when the request ends without keeping its bytes.
 */
export function reserveRoom (app: FastifyInstance, maxOf: (key: ApiKey) => number): onRequestAsyncHookHandler {
  if (!app.hasRequestDecorator('hold')) app.decorateRequest('hold', null)
  return async function reserveRoom (req, reply) {
    const key = req.apiKey!
    const { maxFileSize } = key.limits
    const declared = declaredLength(req)
    // (A chunk over a lower chunk limit was refused by the route's sizeGuard already.)
    if (declared !== undefined && declared > maxFileSize + MULTIPART_SLACK) {
      throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The request declares ${declared} bytes; ${whose(key, 'maxFileSize')}'s file limit is ${maxFileSize} bytes.`)
    }
    const hold = await app.quota.reserve(key, declared, maxOf(key))
    req.hold = hold
    // Kept bytes were recorded before the answer went out, so this frees only what was not kept.
    reply.raw.once('close', () => { hold.release().catch(() => {}) })
  }
}

/**
 * An upload's max_downloads and expiry_hours: as asked (400 when more than its key allows; the
 * service's own bounds are the schema's), or when absent the interface's defaults, lowered to
 * the key's limits.
 */
export function fileSettings (req: FastifyRequest, asked: { maxDownloads: number | undefined, expiryHours: number | undefined }) {
  const key = req.apiKey!
  const { maxDownloads, maxExpiryHours } = key.limits
  if (asked.maxDownloads !== undefined && asked.maxDownloads > maxDownloads) {
    throw overLimit(key, 'maxDownloads', 'DROPCODE_INVALID_FIELD', `Field "max_downloads" must be at most ${maxDownloads}, ${whose(key, 'maxDownloads')}'s limit.`)
  }
  if (asked.expiryHours !== undefined && asked.expiryHours > maxExpiryHours) {
    throw overLimit(key, 'maxExpiryHours', 'DROPCODE_INVALID_FIELD', `Field "expiry_hours" must be at most ${maxExpiryHours}, ${whose(key, 'maxExpiryHours')}'s limit.`)
  }
  return {
    maxDownloads: asked.maxDownloads ?? Math.min(DEFAULT_MAX_DOWNLOADS, maxDownloads),
    expiryHours: asked.expiryHours ?? Math.min(DEFAULT_EXPIRY_HOURS, maxExpiryHours)
  }
}
