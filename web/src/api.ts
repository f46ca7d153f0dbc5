/**
 * Requests to the service's upload endpoints. XMLHttpRequest rather than fetch: it reports
 * upload progress (fetch does not), which the progress bar, rate and ETA need.
 */
import { VERSION_HEADER, type LimitsAnswer, type WhoAmIAnswer } from '../../src/api/answers.js'
import { parseRetryAfter, type TransientAnswer } from '../../src/api/retry.js'

/**
 * An answer as the retry policy reads it (status 0 when none arrived: network down, connection
 * cut, stalled), with its JSON body.
 */
export interface Answer extends TransientAnswer {
  /** The JSON body, or {} when there was none. */
  body: Record<string, unknown>
  /** Retry-After in ms, when the service sent one (409: the lease left of a lock in the way; 429, 503). */
  retryAfterMs: number | undefined
}

/** A multipart field: a text value, or a file part with its filename. */
export type Field = [name: string, value: string] | [name: string, value: Blob, filename: string]

export interface PostOptions {
  /** Called with the request-body bytes sent so far (multipart framing included). */
  onProgress?: (sent: number) => void
  signal?: AbortSignal
  /** ms without upload progress before the request counts as cut (status 0); 0: never. */
  stallMs?: number
}

/** POSTs a multipart form with the API key. Resolves with any answer; rejects only when aborted. */
export function postForm (path: string, fields: Field[], key: string, options: PostOptions = {}): Promise<Answer> {
  const { onProgress, signal, stallMs = 0 } = options
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason)
      return
    }
    const form = new FormData()
    for (const [name, value, filename] of fields) {
      if (typeof value === 'string') form.append(name, value)
      else form.append(name, value, filename)
    }
    const xhr = new XMLHttpRequest()
    let stalled = false
    let timer: number | undefined
    const watch = () => {
      if (stallMs <= 0) return
      clearTimeout(timer)
      timer = window.setTimeout(() => {
        stalled = true
        xhr.abort()
      }, stallMs)
    }
    const onAbort = () => xhr.abort()
    const done = (answer: Answer | undefined) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      if (answer === undefined) reject(signal?.reason ?? new DOMException('aborted', 'AbortError'))
      else resolve(answer)
    }
    xhr.open('POST', path)
    xhr.setRequestHeader('X-Client-Key', key)
    xhr.upload.onprogress = e => {
      watch()
      onProgress?.(e.loaded)
    }
    // Once the body is sent the service answers at its own pace (completing can take minutes).
    xhr.upload.onload = () => clearTimeout(timer)
    xhr.onload = () => done({ status: xhr.status, body: parseBody(xhr.responseText), retryAfterMs: parseRetryAfter(xhr.getResponseHeader('retry-after')), fromService: xhr.getResponseHeader(VERSION_HEADER) !== null })
    xhr.onerror = () => done({ status: 0, body: {}, retryAfterMs: undefined, fromService: false })
    xhr.ontimeout = xhr.onerror
    xhr.onabort = () => done(stalled ? { status: 0, body: {}, retryAfterMs: undefined, fromService: false } : undefined)
    signal?.addEventListener('abort', onAbort)
    watch()
    xhr.send(form)
  })
}

function parseBody (text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text)
    return typeof v === 'object' && v !== null ? v as Record<string, unknown> : {}
  } catch {
    return {}
  }
}

/**
 * GET /key: whether the service takes `key` — its name (`ok`), `refused` (401), or `unknown`
 * (no answer, or not the service's).
 */
export async function checkKey (key: string): Promise<{ status: 'ok', name: string } | { status: 'refused' | 'unknown' }> {
  try {
    const res = await fetch('/key', { headers: { 'x-client-key': key, accept: 'application/json' }, cache: 'no-store' })
    if (res.status === 401 && res.headers.get(VERSION_HEADER) !== null) return { status: 'refused' }
    if (!res.ok) return { status: 'unknown' }
    const body = await res.json() as Partial<WhoAmIAnswer>
    return typeof body.name === 'string' ? { status: 'ok', name: body.name } : { status: 'unknown' }
  } catch {
    return { status: 'unknown' }
  }
}

/** GET /limits: what this service accepts. */
export type Limits = LimitsAnswer

export async function fetchLimits (): Promise<Limits> {
  const res = await fetch('/limits', { headers: { accept: 'application/json' } })
  if (!res.ok) throw new Error(`GET /limits answered ${res.status}`)
  return await res.json() as Limits
}
