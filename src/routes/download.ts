/**
 * GET and HEAD /download/{code}. GET claims a download before the first byte; HEAD only looks
 * (it never consumes a download). Failures answer an HTML page (config.htmlErrors).
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { attachmentDisposition } from '../http/content-disposition.js'
import type { FileRecord } from '../state/index.js'

function fileHeaders (reply: FastifyReply, file: FileRecord) {
  reply.headers({
    'content-type': file.contentType,
    'content-length': String(file.size),
    'content-disposition': attachmentDisposition(file.filename),
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'cache-control': 'no-store',
    // Ranges are not served: every GET is a whole download, counted once (README: Range).
    'accept-ranges': 'none'
  })
}

/** The path parameter; the service checks its format before any store sees it. */
const codeParam = (params: unknown) => (params as { code: string }).code

export default async function downloadRoutes (app: FastifyInstance) {
  const config = { htmlErrors: true }
  const html = { description: 'Friendly HTML error page.', content: { 'text/html': { schema: { type: 'string' } } } }
  const documentedResponses = {
    200: { description: 'The file, as an attachment.', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
    404: { ...html, description: 'Unknown, malformed, expired, exhausted or deleted code (HTML page).' },
    429: { ...html, description: 'Too many failed lookups from this address (optional limit; Retry-After).' },
    500: html,
    503: html
  }

  const { lookupGate, lookupFailed } = app.rateLimits
  app.get('/download/:code', {
    config,
    exposeHeadRoute: false,
    onRequest: lookupGate,
    onResponse: lookupFailed,
    schema: { summary: 'Download a file (uses one download)', tags: ['download'], documentedResponses }
  }, async (req, reply) => {
    const download = await app.files.startDownload(codeParam(req.params))
    reply.raw.once('close', () => download.finish(reply.raw.writableFinished))
    fileHeaders(reply, download.file)
    return reply.send(download.body)
  })

  app.head('/download/:code', {
    config,
    onRequest: lookupGate,
    onResponse: lookupFailed,
    schema: { summary: 'The download\'s headers, without using a download', tags: ['download'], documentedResponses }
  }, async (req, reply) => {
    fileHeaders(reply, await app.files.lookup(codeParam(req.params)))
    return reply.send()
  })
}
