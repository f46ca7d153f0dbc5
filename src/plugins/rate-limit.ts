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
import type { FastifyInstance, FastifyReply, onRequestAsyncHookHandler, onSendAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import ipaddr from 'ipaddr.js'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: {
      /** onRequest for upload endpoints (after authentication). */
      uploads: onRequestAsyncHookHandler
      /** onRequest for code lookups: refuses clients over the failure limit. */
      lookupGate: onRequestAsyncHookHandler
      /** onSend for code lookups: counts a 404 against the client. */
      lookupFailed: onSendAsyncHookHandler<unknown>
    }
  }
}

const noop = async () => {}
const passThrough = async (_req: unknown, _reply: unknown, payload: unknown) => payload

/**
 * The address a limit counts against, parsed by ipaddr.js (never by hand): IPv4 as is, and so
 * is an IPv4-mapped IPv6 address in any spelling (`::ffff:a.b.c.d`, `0:0:0:0:0:ffff:a.b.c.d`),
 * or one guesser's mapped address would stand for every IPv4 client; other IPv6 addresses by
 * their /64, since one host routinely holds a whole /64 and could rotate through 2^64 addresses.
 */
export function limitSubject (ip: string): string {
  if (!ipaddr.isValid(ip)) return ip
  const addr = ipaddr.parse(ip)
  if (addr.kind() === 'ipv4') return addr.toString()
  const v6 = addr as ipaddr.IPv6
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString()
  const groups = v6.parts.slice(0, 4).map(p => p.toString(16))
  return `${groups.join(':')}::/64`
}

function limited (reply: FastifyReply, resetMs: number): DropcodeError {
  const seconds = Math.max(1, Math.ceil(resetMs / 1000))
  reply.header('retry-after', String(seconds))
  return new DropcodeError('DROPCODE_RATE_LIMITED', `Too many requests; try again in ${seconds} s.`, { retry_after: seconds })
}

export default fp(async function rateLimit (app: FastifyInstance, { config, now }: { config: Config, now: () => number }) {
  const { windowMs, failedLookups, uploads } = config.rateLimits
  const lookupKey = (ip: string) => `lookup:${limitSubject(ip)}`

  const uploadsHook: onRequestAsyncHookHandler = async (req, reply) => {
    const key = createHash('sha256').update(String(req.headers['x-client-key'])).digest('hex').slice(0, 32)
    const { count, resetMs } = await app.state.counters.incr(`upload:${key}`, windowMs, now())
    if (count > uploads) throw limited(reply, resetMs)
  }
  const gate: onRequestAsyncHookHandler = async (req, reply) => {
    const { count, resetMs } = await app.state.counters.read(lookupKey(req.ip), now())
    if (count >= failedLookups) throw limited(reply, resetMs)
  }
  // Counted before the 404 goes out, so the client's next request already sees it.
  const failed: onSendAsyncHookHandler<unknown> = async (req, reply, payload) => {
    if (reply.statusCode !== 404) return payload
    await app.state.counters.incr(lookupKey(req.ip), windowMs, now()).catch(err => req.log.warn({ err }, 'could not count a failed lookup'))
    return payload
  }
  app.decorate('rateLimits', {
    uploads: uploads === 0 ? noop : uploadsHook,
    lookupGate: failedLookups === 0 ? noop : gate,
    lookupFailed: failedLookups === 0 ? passThrough : failed
  })
}, { name: 'rate-limit', dependencies: ['stores'] })
