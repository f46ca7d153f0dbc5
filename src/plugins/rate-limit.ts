/**
 * Rate limits, counted in the StateStore so they hold across instances:
 * - failed code lookups (GET/HEAD /download and DELETE /delete answering 404) per client
 *   address, on by default: a client over the limit gets 429 before its code is even looked at,
 *   which is what makes guessing codes impractical (README: guessing arithmetic);
 * - upload-endpoint requests per API key (off by default);
 * - new uploads (POST /upload, /upload/start) per minute of a key that sets `uploads_per_minute`
 *   (services/keys.ts), counted by the key's name.
 * Client addresses are `req.ip`, which honours only TRUST_PROXY, so they cannot be spoofed;
 * IPv6 clients are counted per /64. Fixed windows of RATE_LIMIT_WINDOW_SECONDS; 429 carries
 * Retry-After.
 *
 * Why lookups of one address run one at a time on an instance: the gate can only read the
 * count of misses, and a miss is known (and counted) only once its lookup has answered. Let
 * lookups of one address overlap and every request already in flight passes the gate (measured:
 * 10,000 pipelined HEADs on one connection, all answered 404 with a limit of 10). So each
 * instance admits one lookup per address at a time, and the next one reads the count only after
 * the previous one's miss has been counted: per window, an address gets at most
 * `limit + instances - 1` misses answered, whatever its pipelining or concurrency. Hits cost no
 * write (nothing to refund), and parallel downloads from one address are never refused, only
 * queued for their lookup (a few ms), not for their transfer.
 */
import type { FastifyInstance, FastifyReply, onRequestAsyncHookHandler, onRequestHookHandler, onSendAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import ipaddr from 'ipaddr.js'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import { overLimit, whose } from '../services/keys.js'
import { trustFunction } from '../http/trust-proxy.js'

declare module 'fastify' {
  interface FastifyInstance {
    rateLimits: {
      /** onRequest for upload endpoints (after authentication). */
      uploads: onRequestAsyncHookHandler
      /** onRequest for the endpoints that start an upload (after authentication): the key's uploads per minute. */
      newUploads: onRequestAsyncHookHandler
      /**
       * The hooks of code lookups; none when the limit is off (RATE_LIMIT_FAILED_LOOKUPS=0), so
       * a lookup then pays nothing for it.
       * - onRequest: waits for the address's lookup lane, then refuses clients over the failure limit;
       * - onSend: counts a 404 against the client, then frees the lane.
       */
      lookups: { onRequest: onRequestAsyncHookHandler[], onSend: Array<onSendAsyncHookHandler<unknown>> }
    }
  }
}

const noop = async () => {}

/** Dotted-quad IPv4 without leading zeros: exactly what ipaddr.js prints for it. */
const PLAIN_IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/

/**
 * The address a limit counts against, parsed by ipaddr.js (never by hand): IPv4 as is, and so
 * is an IPv4-mapped IPv6 address in any spelling (`::ffff:a.b.c.d`, `0:0:0:0:0:ffff:a.b.c.d`),
 * or one guesser's mapped address would stand for every IPv4 client; other IPv6 addresses by
 * their /64, since one host routinely holds a whole /64 and could rotate through 2^64 addresses.
 * A dotted quad already spelled as ipaddr.js prints it is taken as it is, unparsed: it is every
 * download's subject (its transfer slot), and parsing it was a visible cost of a 404 (issue 21).
 */
export function limitSubject (ip: string): string {
  if (PLAIN_IPV4.test(ip)) return ip // already in ipaddr.js's spelling: the common case, unparsed
  if (!ipaddr.isValid(ip)) return ip
  const addr = ipaddr.parse(ip)
  if (addr.kind() === 'ipv4') return addr.toString()
  const v6 = addr as ipaddr.IPv6
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString()
  const groups = v6.parts.slice(0, 4).map(p => p.toString(16))
  return `${groups.join(':')}::/64`
}

/**
 * One queue per key: `enter(key)` resolves once every earlier holder of the key has called its
 * release (idempotent). Idle keys hold no memory.
 */
export function keyedLanes () {
  const tails = new Map<string, Promise<void>>()
  return {
    async enter (key: string): Promise<() => void> {
      const before = tails.get(key)
      let release!: () => void
      const mine = new Promise<void>(resolve => { release = resolve })
      const tail = before === undefined ? mine : before.then(() => mine)
      tails.set(key, tail)
      mine.then(() => { if (tails.get(key) === tail) tails.delete(key) }, () => {})
      if (before !== undefined) await before
      return release
    },
    /** Keys with a lookup in flight or queued (for tests). */
    get size () { return tails.size }
  }
}

/** Warns once per process when X-Forwarded-For comes from a peer TRUST_PROXY does not cover. */
function untrustedForwardingWarning (app: FastifyInstance, trusted: (addr: string, hop: number) => boolean): onRequestHookHandler {
  let warned = false
  return (req, _reply, done) => {
    const peer = warned || req.headers['x-forwarded-for'] === undefined ? undefined : req.socket.remoteAddress ?? ''
    if (peer !== undefined && !trusted(peer, 0)) {
      warned = true
      app.log.warn({ peer }, 'a request carries X-Forwarded-For from a peer that TRUST_PROXY does not cover: its client address is the peer\'s, so every client behind that proxy shares one rate limit (one guesser locks them all out). Set TRUST_PROXY to the proxy\'s address or hop count (README: load balancers). Logged once.')
    }
    done()
  }
}

/** A window's remaining ms as Retry-After's whole seconds, at least 1. */
const retrySeconds = (resetMs: number) => Math.max(1, Math.ceil(resetMs / 1000))

function limited (reply: FastifyReply, resetMs: number): DropcodeError {
  const seconds = retrySeconds(resetMs)
  reply.header('retry-after', String(seconds))
  return new DropcodeError('DROPCODE_RATE_LIMITED', `Too many requests; try again in ${seconds} s.`, { retry_after: seconds })
}

const LANE = Symbol('lookup lane')
/** What the gate hands the 404 counter: the address's subject and its lane's release. */
type LaneHolder = { [LANE]?: { subject: string, release: () => void } }

export default fp(async function rateLimit (app: FastifyInstance, { config, now }: { config: Pick<Config, 'rateLimits' | 'trustProxy'>, now: () => number }) {
  const { windowMs, failedLookups, uploads } = config.rateLimits
  const lookupKey = (subject: string) => `lookup:${subject}`
  const lanes = keyedLanes()
  app.addHook('onRequest', untrustedForwardingWarning(app, trustFunction(config.trustProxy)))

  const uploadsHook: onRequestAsyncHookHandler = async (req, reply) => {
    // After the key check (auth.ts's uploadGuards): counted per key name, never the secret.
    const { count, resetMs } = await app.state.counters.incr(`upload:${req.keyId}`, windowMs, now())
    if (count > uploads) throw limited(reply, resetMs)
  }
  const newUploads: onRequestAsyncHookHandler = async (req) => {
    const key = req.apiKey!
    const limit = key.limits.uploadsPerMinute
    if (limit === undefined) return
    const { count, resetMs } = await app.state.counters.incr(`uploads-minute:${key.name}`, 60_000, now())
    if (count > limit) {
      const seconds = retrySeconds(resetMs)
      // (Retry-After: the error handler sets it from retry_after.)
      throw overLimit(key, 'uploadsPerMinute', 'DROPCODE_RATE_LIMITED', `${whose(key, 'uploadsPerMinute')} may start ${limit} uploads a minute; try again in ${seconds} s.`, { retry_after: seconds })
    }
  }
  const gate: onRequestAsyncHookHandler = async (req, reply) => {
    const subject = limitSubject(req.ip)
    const release = await lanes.enter(subject)
    ;(req as LaneHolder)[LANE] = { subject, release }
    // A request that ends without a reply (the client went away) frees the lane too.
    reply.raw.once('close', release)
    const { count, resetMs } = await app.state.counters.read(lookupKey(subject), now())
    if (count >= failedLookups) throw limited(reply, resetMs)
  }
  // Counted before the 404 goes out and before the address's next lookup reads the count.
  const failed: onSendAsyncHookHandler<unknown> = async (req, reply, payload) => {
    const lane = (req as LaneHolder)[LANE] // absent only if a hook before the gate answered
    try {
      if (reply.statusCode === 404) {
        await app.state.counters.incr(lookupKey(lane?.subject ?? limitSubject(req.ip)), windowMs, now()).catch(err => req.log.warn({ err }, 'could not count a failed lookup'))
      }
    } finally {
      lane?.release()
    }
    return payload
  }
  app.decorate('rateLimits', {
    uploads: uploads === 0 ? noop : uploadsHook,
    newUploads,
    lookups: failedLookups === 0 ? { onRequest: [], onSend: [] } : { onRequest: [gate], onSend: [failed] }
  })
}, { name: 'rate-limit', dependencies: ['stores'] })
