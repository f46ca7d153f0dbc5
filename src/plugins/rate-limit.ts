/**
 * Optional rate limits (off by default, as the interface has none), counted in the StateStore
 * so they hold across instances:
 * - failed code lookups (GET/HEAD /download and DELETE /delete answering 404) per client
 *   address: a client over the limit gets 429 before its code is even looked at, which is what
 *   makes guessing codes impractical (README: brute-force arithmetic);
 * - upload-endpoint requests per API key.
 * Client addresses are `req.ip`, which honours only TRUST_PROXY, so they cannot be spoofed;
 * IPv6 clients are counted per /64.
 * Fixed windows of RATE_LIMIT_WINDOW_SECONDS; 429 carries Retry-After.
 */
import { createHash } from 'node:crypto'
import type { FastifyInstance, FastifyReply, onRequestAsyncHookHandler, onResponseAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { DropcodeError } from '../errors.js'

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: {
      /** onRequest for upload endpoints (after authentication). */
      uploads: onRequestAsyncHookHandler
      /** onRequest for code lookups: refuses clients over the failure limit. */
      lookupGate: onRequestAsyncHookHandler
      /** onResponse for code lookups: counts a 404 against the client. */
      lookupFailed: onResponseAsyncHookHandler
    }
  }
}

const noop = async () => {}

/**
 * The address a limit counts against: IPv4 as is; IPv6 by its /64 prefix, since one host
 * routinely holds a whole /64 and could otherwise rotate through 2^64 addresses.
 */
export function limitSubject (ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)
  if (mapped) return mapped[1]!
  if (!ip.includes(':')) return ip
  const [head = '', tail = ''] = ip.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === '' ? [] : tail.split(':')
  const groups = ip.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left
  return groups.slice(0, 4).map(g => g.toLowerCase().replace(/^0+(?=.)/, '')).join(':') + '::/64'
}

function limited (reply: FastifyReply, resetMs: number): DropcodeError {
  const seconds = Math.max(1, Math.ceil(resetMs / 1000))
  reply.header('retry-after', String(seconds))
  return new DropcodeError('DROPCODE_RATE_LIMITED', `Too many requests; try again in ${seconds} s.`, { retry_after: seconds })
}

export default fp(async function rateLimit (app: FastifyInstance, { config }: { config: Config }) {
  const { windowMs, failedLookups, uploads } = config.rateLimits
  const lookupKey = (ip: string) => `lookup:${limitSubject(ip)}`

  const uploadsHook: onRequestAsyncHookHandler = async (req, reply) => {
    const key = createHash('sha256').update(String(req.headers['x-client-key'])).digest('hex').slice(0, 32)
    const { count, resetMs } = await app.state.hitCounter(`upload:${key}`, windowMs)
    if (count > uploads) throw limited(reply, resetMs)
  }
  const gate: onRequestAsyncHookHandler = async (req, reply) => {
    const { count, resetMs } = await app.state.peekCounter(lookupKey(req.ip))
    if (count >= failedLookups) throw limited(reply, resetMs)
  }
  const failed: onResponseAsyncHookHandler = async (req, reply) => {
    if (reply.statusCode !== 404) return
    await app.state.hitCounter(lookupKey(req.ip), windowMs).catch(err => req.log.warn({ err }, 'could not count a failed lookup'))
  }
  app.decorate('rateLimits', {
    uploads: uploads === 0 ? noop : uploadsHook,
    lookupGate: failedLookups === 0 ? noop : gate,
    lookupFailed: failedLookups === 0 ? noop : failed
  })
}, { name: 'rate-limit', dependencies: ['stores'] })
