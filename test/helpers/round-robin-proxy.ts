/**
 * A small round-robin HTTP load balancer on 127.0.0.1 for crash tests: each request goes to
 * the next live backend on a fresh connection (so requests spread even when the client keeps
 * its connection alive), bodies stream both ways. A backend the test marks down gets nothing
 * more (a health check noticed); a backend that dies mid-request cuts its client's connection
 * (after the headers) or answers 502 (before), as load balancers do.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Proxy {
  url: string
  /** Backend URL each request was sent to, in order, with the request's method and path. */
  routed: Array<{ backend: string, method: string, path: string }>
  /** The backend the next request goes to. */
  peek (): string
  /** Stops routing to `backend` (the test killed it). */
  markDown (backend: string): void
  close (): Promise<void>
}

export async function startProxy (backends: string[]): Promise<Proxy> {
  const down = new Set<string>()
  const routed: Proxy['routed'] = []
  let next = 0
  const live = () => backends.filter(b => !down.has(b))
  const server = http.createServer((req, res) => {
    const backend = live()[next++ % live().length]!
    routed.push({ backend, method: req.method!, path: req.url! })
    const upstream = http.request(`${backend}${req.url!}`, { method: req.method, headers: req.headers, agent: false }, up => {
      res.writeHead(up.statusCode!, up.headers)
      up.pipe(res)
      up.once('error', () => res.destroy())
      up.once('close', () => { if (!up.complete) res.destroy() })
    })
    upstream.once('error', () => {
      if (res.headersSent) res.destroy()
      else res.writeHead(502, { 'content-type': 'application/json', connection: 'close' }).end('{"error":"bad gateway"}')
      req.destroy()
    })
    req.pipe(upstream)
    res.once('close', () => { if (!res.writableFinished) upstream.destroy() })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    routed,
    peek: () => live()[next % live().length]!,
    markDown: backend => { down.add(backend) },
    close: () => new Promise(resolve => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
}
