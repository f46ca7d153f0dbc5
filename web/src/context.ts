/**
 * What one upload shares, single or chunked: its settings and hooks, the requests that retry
 * transient failures, and the failures for people. Which answers are transient and how long to
 * wait is the CLI's policy too (src/api/retry.ts); the page retries them for as long as the
 * person keeps it open, and while the browser is offline it waits for it to be online again.
 */
import { isTransient, NO_ANSWER, retryWait } from '../../src/api/retry.js'
import { postForm, type Answer, type Field, type Limits } from './api.js'

export type FailureKind = 'key' | 'too-large' | 'full' | 'rejected' | 'file'

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
      if (!isTransient(answer.status)) {
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

  /** Waits after a transient failure: until online again, or the policy's wait (api/retry.ts). */
  async pause (answer: Answer): Promise<void> {
    const { ms, spends } = retryWait(answer, this.attempt)
    if (spends) this.attempt++
    const offline = answer.status === NO_ANSWER && !navigator.onLine
    this.noticeShown = true
    const retrying = `Retrying in ${Math.ceil(ms / 1000)} s…`
    if (answer.status === NO_ANSWER) {
      this.hooks.notice(offline ? 'Connection lost. The upload continues by itself when the network is back.' : `Cannot reach the service. ${retrying}`, true)
    } else {
      this.hooks.notice(`The service ${busy(answer)}. ${retrying}`, true)
    }
    await wait(offline ? Infinity : ms, this.signal)
  }
}

/** What a transient answer says, for people. */
function busy (a: Answer): string {
  switch (a.status) {
    case 429: return 'is limiting requests (429)'
    case 409: return 'is busy with this upload (409)'
    case 500: return `failed (500${typeof a.body.request_id === 'string' ? `, request id ${a.body.request_id}` : ''})`
    default: return `is busy (${a.status})`
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
    case 413: return new UploadFailure('too-large', `The file is too large (413). ${error ?? 'The service takes no file this large.'}`)
    case 403:
      if (a.body.code === 'DROPCODE_QUOTA_EXCEEDED') return new UploadFailure('rejected', `This API key has no room left in its storage quota (403). ${error ?? ''}`.trim())
      if (a.body.code === 'DROPCODE_TOO_MANY_SESSIONS') return new UploadFailure('rejected', `This API key has as many unfinished uploads open as it may (403). ${error ?? ''}`.trim())
      return new UploadFailure('rejected', `The service refused the upload (403${code}): ${error ?? 'no reason given'}`)
    case 507: return new UploadFailure('full', 'The service is out of storage space (507). Nothing was lost on your side: try again later.')
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
