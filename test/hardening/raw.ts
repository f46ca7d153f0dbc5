/**
 * Raw HTTP for the hardening tests: requests whose bytes are exactly what the test wrote
 * (fetch and FormData would repair a broken body), each raced against a deadline so that a
 * server that never answers fails the test instead of hanging it, and a check that a request
 * left storage and state as they were.
 */
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'
import { startApp, testConfig, within, type RunningApp } from '../helpers/app.js'
import { listStored } from '../helpers/storage.js'

/** How long any request may take to be answered. */
export const ANSWER_WITHIN_MS = 5000

export const BOUNDARY = 'hardening-boundary-7f3a'

export interface RawResponse {
  status: number
  headers: http.IncomingHttpHeaders
  body: Buffer
}

export interface RawRequest {
  method?: string
  path: string
  /** Exactly these headers (node adds Host and Connection: close); no content-type unless given. */
  headers?: Record<string, string>
  body?: Buffer
  /** Declared Content-Length; default: the body's length. */
  contentLength?: number
}

/**
 * The app on the embedded drivers (fs+local), listening on a free port. Its data directory is
 * a fresh temporary one rather than tap's fixture directory, which is named after the test and
 * so shared with any other run of the same file at the same time.
 */
export async function startEmbedded (t: Test): Promise<RunningApp> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-hardening-'))
  const running = await startApp(t, testConfig(t, 'fs+local', {}, { DATA_DIR: dir }))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return running
}

/**
 * Sends one request on a fresh connection and waits for the whole answer (at most
 * ANSWER_WITHIN_MS). A write error after the answer has started (the server closing a
 * connection whose body it refused to read) is not a failure; a connection that closes
 * without an answer is.
 */
export async function send (url: string, req: RawRequest, ms = ANSWER_WITHIN_MS): Promise<RawResponse> {
  const body = req.body ?? Buffer.alloc(0)
  const headers: Record<string, string> = { ...req.headers }
  if (req.body !== undefined || req.contentLength !== undefined) headers['content-length'] = String(req.contentLength ?? body.length)
  let client: http.ClientRequest | undefined
  const answer = new Promise<RawResponse>((resolve, reject) => {
    client = http.request(`${url}${req.path}`, { method: req.method ?? 'POST', headers, agent: false }, res => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    client.on('error', err => reject(err))
    if (body.length > 0) client.write(body)
    client.end()
  })
  try {
    return await within(answer, ms, `${req.method ?? 'POST'} ${req.path}`)
  } finally {
    client?.destroy()
  }
}

/** The request line and headers of a raw request, for net-level tests. */
export function requestHead (path: string, headers: Record<string, string>, method = 'POST'): string {
  return `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`
}

/** Opens a TCP connection to the app. */
export async function connect (url: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Everything the socket receives until the server closes it (or `ms` pass: rejects). */
export async function readUntilClosed (socket: net.Socket, ms = ANSWER_WITHIN_MS): Promise<string> {
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => chunks.push(c))
  const closed = new Promise<string>(resolve => {
    socket.on('error', () => {})
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
  })
  try {
    return await within(closed, ms, 'connection close')
  } finally {
    socket.destroy()
  }
}

export function json (res: RawResponse): Record<string, unknown> {
  try {
    return JSON.parse(res.body.toString('utf8')) as Record<string, unknown>
  } catch {
    throw new Error(`not JSON (status ${res.status}, content-type ${String(res.headers['content-type'])}): ${res.body.toString('utf8').slice(0, 200)}`)
  }
}

/** A multipart body written part by part, byte for byte. */
export class Multipart {
  private readonly chunks: Buffer[] = []
  constructor (readonly boundary = BOUNDARY) {}

  get contentType (): string { return `multipart/form-data; boundary=${this.boundary}` }

  /** A text part. `headers` are extra part headers written before (or after) the disposition. */
  field (name: string, value: string | Buffer, opts: { before?: string[], after?: string[] } = {}): this {
    return this.part(`form-data; name="${name}"`, value, opts)
  }

  /** A file part (has a filename, so it is a file whatever its name). */
  file (name: string, data: string | Buffer, opts: { filename?: string, before?: string[], after?: string[] } = {}): this {
    return this.part(`form-data; name="${name}"; filename="${opts.filename ?? 'f.bin'}"`, data, {
      ...opts, after: ['content-type: application/octet-stream', ...(opts.after ?? [])]
    })
  }

  /** A part with exactly this disposition. */
  part (disposition: string, data: string | Buffer, opts: { before?: string[], after?: string[] } = {}): this {
    const headers = [...(opts.before ?? []), `content-disposition: ${disposition}`, ...(opts.after ?? [])]
    this.chunks.push(Buffer.from(`--${this.boundary}\r\n${headers.map(h => `${h}\r\n`).join('')}\r\n`))
    this.chunks.push(Buffer.from(data))
    this.chunks.push(Buffer.from('\r\n'))
    return this
  }

  raw (bytes: string | Buffer): this {
    this.chunks.push(Buffer.from(bytes))
    return this
  }

  /** The body so far, without the closing delimiter. */
  open (): Buffer { return Buffer.concat(this.chunks) }

  /** The complete body, closing delimiter included. */
  body (): Buffer { return Buffer.concat([...this.chunks, Buffer.from(`--${this.boundary}--\r\n`)]) }
}

export interface StorageState {
  stored: string[]
  due: number
}

export async function storageState (running: RunningApp): Promise<StorageState> {
  return {
    stored: (await listStored(running.config)).sort(),
    due: await running.app.state.cleanup.countDue(Number.MAX_SAFE_INTEGER)
  }
}

/**
 * Storage and the cleanup index are back to `baseline` (by default: empty), polling for up to
 * `ms` since cleanup may follow the response.
 */
export async function assertState (t: Test, running: RunningApp, what: string, baseline: StorageState = { stored: [], due: 0 }, ms = 3000) {
  const deadline = Date.now() + ms
  let now = await storageState(running)
  while (Date.now() < deadline && (JSON.stringify(now.stored) !== JSON.stringify(baseline.stored) || now.due !== baseline.due)) {
    await new Promise(resolve => setTimeout(resolve, 25))
    now = await storageState(running)
  }
  t.same(now.stored, baseline.stored, `${what}: storage holds nothing new`)
  t.equal(now.due, baseline.due, `${what}: cleanup index holds nothing new`)
}
