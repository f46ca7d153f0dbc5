/**
 * A small HTTP proxy in front of the real service, to produce what a network does to the CLI
 * for real: requests held forever (so the CLI can be killed mid-transfer), a download that
 * stops after some bytes, a byte flipped on the way, a 503 answer. It records every request.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Transform, type TransformCallback } from 'node:stream'
import type { Test } from 'tap'

export interface Seen {
  method: string
  path: string
  headers: http.IncomingHttpHeaders
  /** Upstream status (undefined while held or when answered by the proxy). */
  status?: number | undefined
  /** Upstream response headers, once they came. */
  responseHeaders?: http.IncomingHttpHeaders | undefined
  done: boolean
}

export type Action =
  | { kind: 'pass' }
  | { kind: 'hold' }
  | { kind: 'answer', status: number, headers?: Record<string, string>, body?: string }
  /** Forward, but change the bytes on one leg. */
  | { kind: 'alter', request?: () => Transform, response?: () => Transform }

export interface Proxy {
  url: string
  seen: Seen[]
  /** Most /upload/chunk requests in flight at once. */
  maxChunksInFlight: number
  /** Decides each request's fate (default: pass). */
  decide: (req: http.IncomingMessage, n: number) => Action
  /** Where requests go (may change, e.g. to a restarted service); read as each request is forwarded. */
  upstream: string
  /** While set, requests wait for it before going upstream (a balancer queueing during a restart). */
  gate: Promise<void> | undefined
}

/** Flips one byte (XOR 0xff) at `offset` of the stream. */
export function flipAt (offset: number): Transform {
  let pos = 0
  return new Transform({
    transform (chunk: Buffer, _enc, done: TransformCallback) {
      if (offset >= pos && offset < pos + chunk.length) {
        chunk = Buffer.from(chunk)
        chunk[offset - pos] ^= 0xff
      }
      pos += chunk.length
      done(null, chunk)
    }
  })
}

/** Passes everything through, keeping a copy in `into` (for small bodies). */
export function record (into: Buffer[]): Transform {
  return new Transform({
    transform (chunk: Buffer, _enc, done: TransformCallback) {
      into.push(chunk)
      done(null, chunk)
    }
  })
}

/**
 * Bytes a download must have for a cut by `cutAfter` (a few MiB in) to find the service still
 * sending: what the kernel takes in for a loopback connection (here net.ipv4.tcp_rmem's 32 MiB
 * of receive buffer and tcp_wmem's 4 MiB of send buffer) counts as sent for the service, which
 * ends the claim once it handed over the last byte; a cut after that leaves nothing to resume
 * (16 MiB files were cut too late now and then on Node 24 in CI).
 */
export const PAST_SOCKET_BUFFERS = 48 * 1024 * 1024

/** Passes the first `bytes` bytes, then cuts the connection. */
export function cutAfter (bytes: number): Transform {
  let pos = 0
  return new Transform({
    transform (chunk: Buffer, _enc, done: TransformCallback) {
      const take = chunk.subarray(0, Math.max(0, bytes - pos))
      pos += chunk.length
      if (pos < bytes) return done(null, take)
      this.push(take)
      setImmediate(() => this.destroy()) // after the bytes went out
      done()
    }
  })
}

/** Passes the first `bytes` bytes, then holds the rest (the connection stays open, silent). */
export function stopAfter (bytes: number): Transform {
  let pos = 0
  return new Transform({
    transform (chunk: Buffer, _enc, done: TransformCallback) {
      if (pos >= bytes) return // never calls back: the stream stalls here
      const take = chunk.subarray(0, bytes - pos)
      pos += chunk.length
      done(null, take)
    }
  })
}

export async function startProxy (t: Test, upstream: string): Promise<Proxy> {
  let n = 0
  let chunksInFlight = 0
  const proxy: Proxy = { url: '', seen: [], maxChunksInFlight: 0, decide: () => ({ kind: 'pass' }), upstream, gate: undefined }
  const server = http.createServer((req, res) => {
    const seen: Seen = { method: req.method!, path: req.url!, headers: req.headers, done: false }
    proxy.seen.push(seen)
    const isChunk = req.url === '/upload/chunk'
    if (isChunk) proxy.maxChunksInFlight = Math.max(proxy.maxChunksInFlight, ++chunksInFlight)
    let counted = isChunk
    const finish = () => { if (counted) { counted = false; chunksInFlight-- } seen.done = true }
    res.on('close', finish)
    const action = proxy.decide(req, n++)
    if (action.kind === 'hold') return
    if (action.kind === 'answer') {
      req.resume()
      req.on('end', () => res.writeHead(action.status, action.headers ?? {}).end(action.body ?? ''))
      return
    }
    const forward = () => {
      const target = new URL(proxy.upstream)
      return http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, upRes => {
        seen.status = upRes.statusCode
        seen.responseHeaders = upRes.headers
        res.writeHead(upRes.statusCode!, upRes.headers)
        const alter = action.kind === 'alter' ? action.response?.() : undefined
        // A transform that destroys itself cuts the client's connection there.
        alter?.on('close', () => { if (!res.writableFinished) res.destroy() })
        ;(alter !== undefined ? upRes.pipe(alter) : upRes).pipe(res)
      })
    }
    const send = () => {
      const up = forward()
      up.on('error', () => res.destroy())
      // The client went away (killed): the service sees the cut too.
      res.on('close', () => { if (!res.writableFinished) up.destroy() })
      const alter = action.kind === 'alter' ? action.request?.() : undefined
      ;(alter !== undefined ? req.pipe(alter) : req).pipe(up)
    }
    if (proxy.gate === undefined) send()
    else proxy.gate.then(send, () => res.destroy())
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.teardown(() => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }))
  return proxy
}
