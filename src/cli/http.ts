/**
 * HTTP for the CLI, on node:http/https rather than fetch: request bodies are streamed with an
 * exact Content-Length (so the service's size checks apply before the body is read), an early
 * answer (401, 413) is read even while the body is still being written, and network errors keep
 * their codes (ECONNREFUSED, ECONNRESET) instead of fetch's bare "fetch failed".
 *
 * Retries follow the clients' one policy (api/retry.ts, the web page's too): network errors,
 * 408, 409 (a busy chunk index), 429, 500, 502, 503 and 504 are retried with exponential backoff
 * and jitter, waiting at least what `Retry-After` says; anything else is final. The service's
 * 409 with `Retry-After` names when a lock or lease in the way runs out: waiting for it spends no
 * retry, up to MAX_LEASE_WAIT_MS in all (a proxy's 409 spends one like any transient answer).
 *
 * Every answer of the service carries `Dropcode-Version`. One without it came from something
 * else: a proxy's own page (nginx's 413 for a body over client_max_body_size, a 502 or 504 when
 * the service is down or slow) or a URL that is no dropcode service. Its status is reported as
 * that, never as the service's (a proxy's 404 is not "no such code"), with exit 7 (or the usual
 * retries and exit 6 for the transient statuses).
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import https from 'node:https'
import { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { isTransient, NO_ANSWER, parseRetryAfter, retryWait } from '../api/retry.js'
import { ERROR_HEADER } from '../api/answers.js'
import { VERSION, VERSION_HEADER } from '../core/version.js'
import { CliError, EXIT, exitForStatus } from './exit-codes.js'
import { limitRefusal } from './refusals.js'

/** A request body as `json` sends it: a Multipart form, or JSON (jsonBody). */
export interface RequestBody {
  headers: () => Record<string, string>
  /** One attempt's body: its length and a fresh stream of it. */
  body: () => { length: number | undefined, open: () => Readable }
}

/** A JSON request body (the admin API's). */
export function jsonBody (value: unknown): RequestBody {
  const data = Buffer.from(JSON.stringify(value))
  return { headers: () => ({ 'content-type': 'application/json' }), body: () => ({ length: data.length, open: () => Readable.from([data]) }) }
}

/**
 * Service codes of a 409 that no retry changes (the policy's 409 is a lock that runs out): the
 * key's name is taken.
 */
const FINAL_CONFLICTS: ReadonlySet<string> = new Set(['DROPCODE_KEY_EXISTS'])

/** A connection with no byte moving either way for this long is cut and retried (ms). */
const IDLE_TIMEOUT_MS = 120_000
/** Waits for a lease to run out that spend no retry, in all per request (ms): more than the longest lease (CHUNK_LOCK_SECONDS ≤ 600). */
const MAX_LEASE_WAIT_MS = 15 * 60_000
/** Where an answer that is not the service's is explained. */
const PROXY_DOCS = 'see the load-balancer docs (docs/load-balancers.md)'

export interface ClientOptions {
  /** Base URL of the service (a path prefix is kept). */
  url: string
  /** X-Client-Key, for the upload and admin (keys) endpoints. */
  key?: string | undefined
  /** Attempts after the first one. */
  retries: number
  /** Connections kept open to the service (chunks in flight). */
  sockets: number
  /** Called before each retry, for the progress display. */
  onRetry?: (what: string, reason: string, delayMs: number) => void
}

export class Client {
  readonly base: URL
  private readonly agent: http.Agent

  constructor (readonly opts: ClientOptions) {
    const base = new URL(opts.url)
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new CliError(EXIT.USAGE, `--url must be http:// or https://, not ${base.protocol}`)
    // One slash at the end, however many were typed (`https://host//` is the service's root).
    base.pathname = `${base.pathname.replace(/\/+$/, '')}/`
    this.base = base
    const Agent = base.protocol === 'https:' ? https.Agent : http.Agent
    this.agent = new Agent({ keepAlive: true, maxSockets: Math.max(1, opts.sockets) })
  }

  url (path: string): URL {
    return new URL(path.replace(/^\//, ''), this.base)
  }

  close () {
    this.agent.destroy()
  }

  /**
   * One request, no retries. Resolves with the response (its body unread) as soon as it
   * arrives, even while `body` is still being written. Network failures reject with a
   * Retryable; a failing body source rejects with its own error; `signal` cuts the request.
   */
  exchange (method: string, path: string, headers: Record<string, string>, body?: { length: number | undefined, open: () => Readable }, signal?: AbortSignal): Promise<IncomingMessage> {
    const mod = this.base.protocol === 'https:' ? https : http
    return new Promise((resolve, reject) => {
      const req = mod.request(this.url(path), {
        method,
        agent: this.agent,
        signal,
        headers: { 'user-agent': `dropcode-cli/${VERSION}`, ...headers, ...(body?.length !== undefined ? { 'content-length': String(body.length) } : {}) }
      })
      let answered = false
      req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new Error(`no progress for ${IDLE_TIMEOUT_MS / 1000} s`)))
      req.on('response', res => { answered = true; resolve(res) })
      req.on('error', err => {
        if (answered) return
        // Not transient: the same handshake fails the same way however often it is tried.
        if (this.base.protocol === 'https:' && isProtocolMismatch(err)) {
          reject(new CliError(EXIT.NETWORK, `${this.base.origin} does not speak TLS (the TLS handshake was answered in plain HTTP): use http://${this.base.host}${this.base.pathname === '/' ? '' : this.base.pathname}, or the address where TLS is served`))
          return
        }
        reject(new Retryable(describe(err), NO_ANSWER))
      })
      if (body === undefined) { req.end(); return }
      const source = body.open()
      source.on('error', err => {
        req.destroy()
        reject(err instanceof CliError ? err : new CliError(EXIT.LOCAL, `cannot read the input: ${describe(err)}`))
      })
      req.on('close', () => { if (!source.destroyed) source.destroy() })
      source.pipe(req)
    })
  }

  /**
   * Runs `attempt` until it succeeds, fails for good, or the retries are spent; or until
   * `signal` aborts (its reason is thrown: nothing is retried or waited for after it).
   */
  async retrying<T> (what: string, attempt: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let leaseWaits = 0
    for (let n = 0, tries = 1; ; tries++) {
      try {
        return await attempt()
      } catch (err) {
        signal?.throwIfAborted()
        if (!(err instanceof Retryable)) throw err
        const wait = retryWait(err, n)
        if (!wait.spends && leaseWaits + wait.ms <= MAX_LEASE_WAIT_MS) {
          // Not a failure: the service said when the lock in the way runs out.
          leaseWaits += wait.ms
        } else {
          if (n >= this.opts.retries) throw new CliError(err.exitCode, `${what}: ${err.message}${this.opts.retries > 0 ? ` (after ${tries} attempts)` : ''}${err.hint}`)
          n++
        }
        this.opts.onRetry?.(what, err.message, wait.ms)
        await sleep(wait.ms, undefined, { signal })
      }
    }
  }

  /**
   * A JSON request with retries; a non-2xx answer becomes a CliError (or a retry). `retry:
   * false` for a body that cannot be read twice; `digestRetry` resends after a digest mismatch
   * (bytes damaged on the way: the service stored nothing); `signal` cuts the request and ends
   * its retries.
   */
  async json<T = Record<string, unknown>> (what: string, method: string, path: string, form?: RequestBody, opts: { retry?: boolean, digestRetry?: boolean, signal?: AbortSignal } = {}): Promise<T> {
    const attempt = async () => await this.once<T>(method, path, form, opts)
    if (opts.retry === false) {
      try {
        return await attempt()
      } catch (err) {
        throw err instanceof Retryable ? new CliError(err.exitCode, `${what}: ${err.message}${err.hint}`) : err
      }
    }
    return await this.retrying(what, attempt, opts.signal)
  }

  /**
   * One attempt of `json`: a transient failure rejects with a Retryable (for `retrying`), a
   * final one with a CliError. For callers that must know what an earlier attempt met (a key's
   * creation, whose lost answer held its only copy of the secret).
   */
  async once<T = Record<string, unknown>> (method: string, path: string, form?: RequestBody, opts: { digestRetry?: boolean, signal?: AbortSignal } = {}): Promise<T> {
    const res = await this.exchange(method, path, { ...this.auth(), ...(form?.headers() ?? {}) }, form?.body(), opts.signal)
    const text = (await readAll(res, 1 << 20)).toString('utf8')
    let body: Record<string, unknown> | undefined
    try { body = JSON.parse(text) as Record<string, unknown> } catch { /* not JSON: an HTML error page or a proxy's answer */ }
    if (res.statusCode! >= 200 && res.statusCode! < 300) {
      // A success without JSON is no answer of the service (a captive portal, a web server
      // at --url). One with JSON is taken even without the header: a proxy may drop headers.
      if (body !== null && typeof body === 'object') return body as T
      if (!fromService(res.headers)) throw new CliError(EXIT.REFUSED, `something that is not a dropcode service answered: ${statusLine(res.statusCode!, res.statusMessage)}, ${res.headers['content-type'] ?? 'no content type'} (no Dropcode-Version header); check --url, ${PROXY_DOCS}`)
      return {} as T
    }
    const err = answerError(res.statusCode!, res.headers, body ?? {}, res.statusMessage, this.url(path))
    if (opts.digestRetry === true && err instanceof CliError && err.exitCode === EXIT.INTEGRITY) throw new Retryable(err.message, res.statusCode!, undefined, EXIT.INTEGRITY)
    throw err
  }

  auth (): Record<string, string> {
    return this.opts.key !== undefined ? { 'x-client-key': this.opts.key } : {}
  }
}

/**
 * A failure worth trying again (api/retry.ts): `status` is the answer's (NO_ANSWER for a network
 * failure), with its Retry-After; `hint`: added to the final message only (not to each retry's
 * note).
 */
export class Retryable extends Error {
  constructor (message: string, readonly status: number, readonly retryAfterMs?: number, readonly exitCode: typeof EXIT.NETWORK | typeof EXIT.REFUSED | typeof EXIT.INTEGRITY = EXIT.NETWORK, readonly hint = '', readonly fromService = false) {
    super(message)
  }
}

/**
 * Whether an answer is the service's: it says its version, or (through a proxy that drops
 * headers it does not know) its body is one of the service's JSON errors.
 */
export function fromService (headers: IncomingHttpHeaders, body: Record<string, unknown> = {}): boolean {
  return headers[VERSION_HEADER] !== undefined || (typeof body.code === 'string' && body.code.startsWith('DROPCODE_'))
}

const statusLine = (status: number, reason: string | undefined) => `${status}${reason !== undefined && reason !== '' ? ` ${reason}` : ''}`

/**
 * The error for a non-2xx answer: Retryable for a transient status (api/retry.ts), else a final
 * CliError. One that is not the service's is reported as a proxy's, with exit 7 when final.
 */
/**
 * A dropcode service answered that there is no such endpoint: --url points inside it, not at
 * its root (`https://host/dropcode` when the service is at `https://host/`), so every request
 * misses. Not "no such file": exit 7, with the URL tried.
 */
export const wrongPath = (url: URL | string | undefined) =>
  new CliError(EXIT.REFUSED, `${url !== undefined ? String(url) : 'the URL'} is no endpoint of the dropcode service there (404 DROPCODE_ROUTE_NOT_FOUND): --url must be the service's root, such as https://drop.example.com, not a path inside it`)

export function answerError (status: number, headers: IncomingHttpHeaders, body: Record<string, unknown> = {}, reason?: string, url?: URL | string): Error {
  const service = fromService(headers, body)
  const code = typeof body.code === 'string' ? body.code : undefined
  const what = service
    ? limitRefusal(status, body) ?? `${status}${code !== undefined ? ` ${code}` : ''}${typeof body.error === 'string' ? `: ${body.error}` : ''}`
    : `${statusLine(status, reason)} (no Dropcode-Version header)`
  // The retry policy is the status's, whoever answered: a proxy's 502 or 504 may pass.
  if (isTransient(status) && !(service && code !== undefined && FINAL_CONFLICTS.has(code))) {
    return new Retryable(service ? what : `a proxy between you and the service answered ${what}`, status, parseRetryAfter(headers['retry-after']),
      status === 409 ? EXIT.REFUSED : EXIT.NETWORK, service ? '' : `, ${PROXY_DOCS}`, service)
  }
  if (!service) return new CliError(EXIT.REFUSED, `a proxy between you and the service refused the request: ${what}, ${PROXY_DOCS}`)
  if (code === 'DROPCODE_ROUTE_NOT_FOUND' || headers[ERROR_HEADER] === 'DROPCODE_ROUTE_NOT_FOUND') return Object.assign(wrongPath(url), { body })
  const err = new CliError(exitForStatus(status, code), what)
  return Object.assign(err, { body })
}

export async function readAll (res: Readable, limit: number): Promise<Buffer> {
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size <= limit) parts.push(chunk)
  }
  return Buffer.concat(parts)
}

/** A TLS handshake answered by something that is not TLS (plain HTTP, most often): OpenSSL's "wrong version number" and kin. */
export function isProtocolMismatch (err: unknown): boolean {
  const e = err as NodeJS.ErrnoException
  return e?.code === 'EPROTO' || e?.code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number|packet length too long|unknown protocol/i.test(e?.message ?? '')
}

export const describe = (err: unknown): string => {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code
    return code !== undefined && !err.message.includes(code) ? `${err.message} (${code})` : err.message
  }
  return String(err)
}
