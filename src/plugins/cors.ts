/**
 * Optional CORS (CORS_ORIGINS), so a team's own web tool on another origin can upload, download
 * and delete from the browser. Off by default: without it browsers keep other origins' scripts
 * from reading our answers, which is what a service holding API keys wants unless told otherwise.
 *
 * Only the API routes take part (uploads, downloads, deletes, /limits: declared with
 * `config.crossOrigin`); our own pages and health checks stay same-origin (metrics are not on
 * this port at all). Preflights are answered in the
 * onRequest hook, registered before the key check and the rate limits: a browser sends no
 * X-Client-Key on a preflight, so it must never meet them. No credentials (cookies) are
 * involved; the key travels as a header, which is why X-Client-Key is an allowed request header.
 * The headers a client needs to verify and resume a download, and to tell the service's
 * answers from a proxy's (Dropcode-Version), are exposed to scripts, and so are tus's (routes/tus.ts),
 * so Uppy on another origin uploads.
 */
import cors from '@fastify/cors'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Scripts of the origins in CORS_ORIGINS may call this route (the API's routes). */
    crossOrigin?: boolean
  }
}

/** A route's path (`/download/:code`) as a pattern matching the paths it serves. */
function pathPattern (url: string): RegExp {
  const parts = url.split('/').map(part => part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  return new RegExp(`^${parts.join('/')}$`)
}

/** The request headers of tus (routes/tus.ts) a script may send, and the answers' it may read. */
// (With the IETF resumable-upload draft's, on the same routes: Upload-Draft-Interop-Version,
// Upload-Complete, Content-Disposition; Upload-Limit.)
const TUS_REQUEST_HEADERS = ['Tus-Resumable', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Metadata', 'Upload-Offset', 'Upload-Checksum', 'Upload-Concat', 'X-HTTP-Method-Override', 'X-Requested-With', 'Upload-Draft-Interop-Version', 'Upload-Complete', 'Content-Disposition']
const TUS_RESPONSE_HEADERS = ['Location', 'Tus-Resumable', 'Tus-Version', 'Tus-Extension', 'Tus-Max-Size', 'Tus-Checksum-Algorithm', 'Upload-Offset', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Metadata', 'Upload-Expires', 'Upload-Concat', 'Upload-Complete', 'Upload-Limit']

export default fp(async function corsPlugin (app: FastifyInstance, opts: { origins: string[] }) {
  if (opts.origins.length === 0) return
  // A preflight is routed to @fastify/cors's own OPTIONS route, not to the one it asks about,
  // and fastify's findRoute does not say a route's config: the cross-origin routes' paths are
  // collected as they are declared, and a preflight's path is matched against them.
  const crossOriginPaths: RegExp[] = []
  app.addHook('onRoute', route => {
    if (route.config?.crossOrigin === true) crossOriginPaths.push(pathPattern(route.url))
  })
  const crossOrigin = (req: FastifyRequest): boolean => {
    if (req.method !== 'OPTIONS') return req.routeOptions.config?.crossOrigin === true
    // An OPTIONS that is no preflight asks the route itself (tus's OPTIONS: its capabilities).
    if (req.headers['access-control-request-method'] === undefined) return false
    const path = req.url.split(/[?#]/, 1)[0]!
    return crossOriginPaths.some(p => p.test(path))
  }
  const origin = opts.origins.includes('*') ? '*' : opts.origins
  const api = {
    origin,
    methods: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'],
    allowedHeaders: ['X-Client-Key', 'Content-Type', 'Range', 'If-Range', 'X-Request-Id', ...TUS_REQUEST_HEADERS],
    exposedHeaders: ['Content-Disposition', 'Content-Length', 'Content-Range', 'Accept-Ranges', 'ETag', 'Repr-Digest', 'Retry-After', 'X-Request-Id', 'Dropcode-Version', 'Dropcode-Error', 'Dropcode-Downloads-Left', 'Dropcode-Expires', 'Dropcode-Code', ...TUS_RESPONSE_HEADERS],
    maxAge: 600, // s a browser may reuse a preflight answer
    credentials: false
  }
  await app.register(cors, {
    hideOptionsRoute: true,
    delegator: (req: FastifyRequest, done: (err: Error | null, options: object) => void) => {
      done(null, crossOrigin(req) ? api : { origin: false })
    }
  })
}, { name: 'cors' })
