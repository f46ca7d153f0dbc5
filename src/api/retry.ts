/**
 * The one retry policy of dropcode's clients, the CLI (cli/http.ts) and the web page
 * (web/src/context.ts): which answers are worth another try, how long to wait before it, and
 * what `Retry-After` means. Plain TypeScript with no Node or browser API: the page's build
 * (web/build.mjs) compiles this folder beside its own modules.
 *
 * Transient: no answer at all (a network error, a cut or stalled connection: status 0), 408,
 * 409 (a chunk or session busy: a lock still held), 429, 500, 502, 503 and 504, as curl's
 * `--retry` (plus 409). Anything else is final: other 4xx answers will not change by asking
 * again, and 507 (storage full) does not clear within a retry's seconds.
 */

/** A status with no answer behind it: the request failed on the way. */
export const NO_ANSWER = 0

const TRANSIENT: ReadonlySet<number> = new Set([NO_ANSWER, 408, 409, 429, 500, 502, 503, 504])

/** Whether an answer with this status (0: none arrived) is worth trying again. */
export const isTransient = (status: number): boolean => TRANSIENT.has(status)

/** First backoff (ms); doubles per spent attempt up to MAX_BACKOFF_MS, plus up to 50 % jitter. */
export const BASE_BACKOFF_MS = 500
export const MAX_BACKOFF_MS = 15_000
/** Longest Retry-After honoured (ms); a longer one is cut to this. */
export const MAX_RETRY_AFTER_MS = 60_000
/** Added to a lease's Retry-After, so the retry arrives after it ran out (ms, at most). */
export const LEASE_JITTER_MS = 500

/**
 * Retry-After in ms (delta-seconds or an HTTP date, RFC 9110 §10.2.3), between 0 and
 * MAX_RETRY_AFTER_MS; undefined when absent or unreadable.
 */
export function parseRetryAfter (value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined
  const text = value.trim()
  // An HTTP date starts with its day's name (all three of RFC 9110's formats); anything else
  // Date.parse would read ("-5", "1.5" as years or months) is no Retry-After.
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : /^[A-Za-z]{3}/.test(text) ? Date.parse(text) - now : NaN
  return Number.isFinite(ms) ? Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS) : undefined
}

/** A transient answer as the policy reads it. */
export interface TransientAnswer {
  /** HTTP status; NO_ANSWER when none arrived. */
  status: number
  /** Its Retry-After (ms), when it had one. */
  retryAfterMs?: number | undefined
  /**
   * Whether the service gave it (it carries `Dropcode-Version`): only the service's 409 names a
   * lease of its own; a proxy's 409 (or another server's at a wrong URL) is backed off like any
   * transient answer.
   */
  fromService: boolean
}

export interface RetryWait {
  /** How long to wait before the next try (ms). */
  ms: number
  /**
   * Whether the wait spends an attempt. A 409 with Retry-After names when a lock or lease in the
   * way runs out (perhaps one of a request that died with its instance): waiting for it is no
   * failure, so it spends none and the backoff does not grow.
   */
  spends: boolean
}

/**
 * The wait before trying again after a transient answer, the `spent`-th failure so far (0 for
 * the first): the growing backoff, never shorter than Retry-After; the service's 409 with
 * Retry-After: that lease, spending nothing. `random` in [0, 1) spreads clients that failed
 * together.
 */
export function retryWait ({ status, retryAfterMs, fromService }: TransientAnswer, spent: number, random = Math.random()): RetryWait {
  if (status === 409 && fromService && retryAfterMs !== undefined) return { ms: retryAfterMs + random * LEASE_JITTER_MS, spends: false }
  const backoff = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** spent) * (1 + random / 2)
  return { ms: Math.max(backoff, retryAfterMs ?? 0), spends: true }
}
