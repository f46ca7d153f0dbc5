/**
 * What one upload shares, single or chunked: its settings and hooks, the requests that retry
 * transient failures (network, 409, 429, 502–504: until the browser is online again, after
 * Retry-After, or after a backoff of 1 s doubling to 30 s), and the failures for people.
 */
import { postForm, type Answer, type Field, type Limits } from './api.js'

const MAX_BACKOFF_MS = 30_000
/** Answers worth retrying: no answer (network), busy session, rate limit, unavailable. */
export const TRANSIENT = new Set([0, 408, 409, 429, 502, 503, 504])

export type FailureKind = 'key' | 'too-large' | 'full' | 'rejected' | 'server' | 'file'

/** An upload that cannot go on by itself; `message` is for people. */
export class UploadFailure extends Error {
  override name = 'UploadFailure'
  constructor (readonly kind: FailureKind, message: string) {
    super(message)
  }
}

export interface Progress {
  /** Bytes the service holds, plus bytes of chunks on their way. */
  done: number
  total: number
  /** Bytes sent by this page so far (for the rate: chunks found on the service add nothing). */
  transferred: number
}

export interface Hooks {
  progress (p: Progress): void
  /**
   * Something for the person to know, or undefined once it passed. `waiting`: the upload is
   * paused until the network is back or the service is ready again.
   */
  notice (text: string | undefined, waiting?: boolean): void
}

export interface Settings {
  key: string
  maxDownloads: number
  expiryHours: number
  limits: Limits
  signal: AbortSignal
}

export interface Result {
  code: string
  size: number
  sha256: string
  filename: string
  maxDownloads: number
  expiryHours: number
}

/** The shared parts of one upload: key, abort signal, backoff, the notice shown, bytes sent. */
export class Context {
  private attempt = 0
  private noticeShown = false
  transferred = 0

  constructor (readonly settings: Settings, readonly hooks: Hooks) {}

  get signal () { return this.settings.signal }

  /** POSTs until the answer is not a transient failure (network, 409, 429, 503…). */
  async send (path: string, fields: Field[], onProgress?: (sent: number) => void): Promise<Answer> {
    for (;;) {
      const answer = await postForm(path, fields, this.settings.key, { signal: this.signal, onProgress: this.meter(onProgress) })
      if (!TRANSIENT.has(answer.status)) {
        this.recovered()
        return answer
      }
      await this.pause(answer)
    }
  }

  /** Counts request-body bytes into `transferred` (each request reports its own running total). */
  meter (onProgress?: (sent: number) => void): (sent: number) => void {
    let last = 0
    return sent => {
      this.transferred += Math.max(0, sent - last)
      last = sent
      onProgress?.(sent)
    }
  }

  recovered (): void {
    this.attempt = 0
    if (this.noticeShown) this.hooks.notice(undefined, false)
    this.noticeShown = false
  }

  /** Waits after a transient failure: until online again, Retry-After, or a growing backoff. */
  async pause (answer: Answer): Promise<void> {
    const ms = answer.retryAfterMs ?? Math.min(MAX_BACKOFF_MS, 1000 * 2 ** this.attempt)
    // A 409 with Retry-After names when a lock in the way runs out (perhaps one of a request that
    // died with its instance): waiting for it is no failure, so the backoff does not grow.
    if (!(answer.status === 409 && answer.retryAfterMs !== undefined)) this.attempt++
    const offline = answer.status === 0 && !navigator.onLine
    this.noticeShown = true
    if (answer.status === 0) {
      this.hooks.notice(offline
        ? 'Connection lost. The upload continues by itself when the network is back.'
        : `Cannot reach the service. Retrying in ${Math.ceil(ms / 1000)} s…`, true)
    } else {
      const what = answer.status === 429 ? 'is limiting requests (429)' : answer.status === 409 ? 'is busy with this upload (409)' : `is busy (${answer.status})`
      this.hooks.notice(`The service ${what}. Retrying in ${Math.ceil(ms / 1000)} s…`, true)
    }
    await wait(offline ? Infinity : ms, this.signal)
  }
}

/** Resolves after `ms`, or as soon as the browser comes back online; rejects when aborted. */
function wait (ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer)
      window.removeEventListener('online', done)
      signal.removeEventListener('abort', abort)
      resolve()
    }
    const abort = () => {
      done()
      reject(signal.reason)
    }
    const timer = Number.isFinite(ms) ? window.setTimeout(done, ms) : undefined
    window.addEventListener('online', done)
    signal.addEventListener('abort', abort)
    if (signal.aborted) abort()
    else if (!Number.isFinite(ms) && navigator.onLine) done()
  })
}

/** Turns a final answer that is not a success into a failure for people. */
export function failure (a: Answer): UploadFailure {
  const error = typeof a.body.error === 'string' ? a.body.error : undefined
  const code = typeof a.body.code === 'string' ? ` ${a.body.code}` : ''
  switch (a.status) {
    case 401: return new UploadFailure('key', 'The service refused this API key (401). Enter a valid key and try again.')
    case 413: return new UploadFailure('too-large', `The file is larger than this service accepts (413). ${error ?? ''}`.trim())
    case 507: return new UploadFailure('full', 'The service is out of storage space (507). Nothing was lost on your side: try again later.')
    case 500: {
      const id = typeof a.body.request_id === 'string' ? `, request id ${a.body.request_id}` : ''
      return new UploadFailure('server', `The service failed (500${id}). Try again.`)
    }
    default: return new UploadFailure('rejected', `The service refused the upload (${a.status}${code}): ${error ?? 'no reason given'}`)
  }
}

export async function read (blob: Blob): Promise<ArrayBuffer> {
  try {
    return await blob.arrayBuffer()
  } catch {
    throw new UploadFailure('file', 'The file can no longer be read (was it moved, changed or deleted?). Choose it again to continue.')
  }
}

export function result (a: Answer, filename: string, maxDownloads: number, expiryHours: number): Result {
  return { code: String(a.body.code), size: Number(a.body.size), sha256: String(a.body.sha256 ?? ''), filename, maxDownloads, expiryHours }
}
