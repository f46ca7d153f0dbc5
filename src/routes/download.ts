/**
 * GET and HEAD /download/{code}. GET claims a download before the first byte, or resumes one
 * (Range + If-Range with the claim's ETag: 206, counting nothing); HEAD only looks (it never
 * consumes a download). Failures answer an HTML page (config.htmlErrors). The ETags are this
 * route's: a claim's (`"c-<claim id>"`, a secret only its downloader saw) on GET, the file's
 * content on HEAD.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import type { FileRecord } from '../core/model.js'
import { attachmentDisposition } from '../http/content-disposition.js'
import { parseRange } from '../http/range.js'
import { reprDigest } from '../http/repr-digest.js'
import { countSentBytes } from '../http/sent-bytes.js'
import { answerError } from '../plugins/error-handler.js'
import { FileNotFound, RangeNotSatisfiable, type Download, type DownloadRequest } from '../services/files.js'
import { CodeParams } from './schemas.js'

/** The ETag of a claim: a secret only its downloader saw. */
const claimETag = (claimId: string) => `"c-${claimId}"`
const CLAIM_ETAG = /^"c-([A-Za-z0-9_-]{22})"$/
/** HEAD's ETag names the file (its content). */
const fileETag = (file: FileRecord) => file.sha256 !== ''
  ? `"s-${Buffer.from(file.sha256, 'hex').toString('base64url')}"`
  : `"f-${file.code}-${file.createdAt}"`

function fileHeaders (reply: FastifyReply, file: FileRecord, etag: string, length: number) {
  reply.headers({
    'content-type': file.contentType,
    'content-length': String(length),
    'content-disposition': attachmentDisposition(file.filename),
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'cache-control': 'no-store',
    // Ranges are served to the holder of a claim only (Range + If-Range with its ETag).
    'accept-ranges': 'bytes',
    etag
  })
  // RFC 9530 Repr-Digest of the whole representation (also on 206 answers).
  if (file.sha256 !== '') reply.header('repr-digest', reprDigest(file.sha256))
  // What is left of the file, for the info page (HEAD counts nothing): after a GET's claim, the
  // downloads left beside this one.
  reply.header('dropcode-downloads-left', String(Math.max(0, file.maxDownloads - file.downloads)))
  reply.header('dropcode-expires', new Date(file.expiresAt).toISOString())
}

/**
 * A GET's resume, if it asks for one: a `Range` (any: one the service cannot serve as asked
 * resumes the whole file) with `If-Range` naming a claim. Anything else claims a new download,
 * `Range` ignored.
 */
function resumeOf (range: string | undefined, ifRange: string | string[] | undefined): DownloadRequest {
  if (range === undefined) return {}
  const claimId = CLAIM_ETAG.exec((typeof ifRange === 'string' ? ifRange : ifRange?.[0])?.trim() ?? '')?.[1]
  return claimId !== undefined ? { resume: { claimId, range: parseRange(range) } } : {}
}

const downloadRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const config = { htmlErrors: true, crossOrigin: true }
  const html = { description: 'Friendly HTML error page.', content: { 'text/html': { schema: { type: 'string' } } } }
  const headers = {
    ETag: { description: 'GET: the claim (a secret, for If-Range when resuming); HEAD: the file.', schema: { type: 'string' } },
    'Repr-Digest': { description: 'RFC 9530: sha-256=:<base64>: of the whole file.', schema: { type: 'string' } },
    'Dropcode-Downloads-Left': { description: 'Downloads still allowed (after a GET: besides this one).', schema: { type: 'integer' } },
    'Dropcode-Expires': { description: 'When the file expires (ISO 8601, UTC).', schema: { type: 'string', format: 'date-time' } }
  }
  const documentedResponses = {
    200: { description: 'The file, as an attachment (one download claimed).', headers, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
    206: { description: 'Resumed: the requested range of a claim named by If-Range (nothing counted).', headers, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
    404: { ...html, description: 'Unknown, malformed, expired, exhausted or deleted code (HTML page).' },
    416: { ...html, description: 'The claim\'s requested range starts past the end of the file (Content-Range: bytes */size).' },
    429: { ...html, description: 'Too many failed lookups from this address (the guessing limit; Retry-After).' },
    500: html,
    503: html
  }

  const { lookups } = app.rateLimits
  app.get('/download/:code', {
    config,
    exposeHeadRoute: false,
    onRequest: [...lookups.onRequest, app.transferSlots.download],
    onSend: lookups.onSend,
    schema: { summary: 'Download a file (uses one download), or resume a cut one', tags: ['download'], params: CodeParams, documentedResponses }
  }, async (req, reply) => {
    // Stream through proxies, never buffered: stock nginx (proxy_buffering on) would read the
    // whole file ahead of a slow client, so the last byte leaves here early, the download counts
    // as whole and a one-time file is deleted while the client has a fraction of it.
    reply.header('x-accel-buffering', 'no')
    let download: Download
    try {
      download = await app.files.download(req.params.code, resumeOf(req.headers.range, req.headers['if-range']))
    } catch (err) {
      // An unknown code is answered here, not thrown: see answerError.
      if (err instanceof FileNotFound) return answerError(err, req, reply, config.htmlErrors)
      if (err instanceof RangeNotSatisfiable) reply.header('content-range', `bytes */${err.size}`)
      throw err
    }
    const { file, range } = download
    const length = range === undefined ? file.size : range.end - range.start + 1
    // Whole when every byte went out, even if the client closed before the response ended
    // (curl does, once it has Content-Length bytes): see http/sent-bytes.ts. An empty body is
    // written by the response's end, so only `finish` tells that its headers went out.
    const sent = countSentBytes(reply.raw)
    reply.raw.once('close', () => download.finish(reply.raw.writableFinished || (length > 0 && sent() >= length)))
    fileHeaders(reply, file, claimETag(download.claimId), length)
    if (range !== undefined) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${file.size}`)
    return reply.send(download.body)
  })

  app.head('/download/:code', {
    config,
    onRequest: lookups.onRequest,
    onSend: lookups.onSend,
    schema: { summary: 'The download\'s headers, without using a download', tags: ['download'], params: CodeParams, documentedResponses }
  }, async (req, reply) => {
    let file: FileRecord
    try {
      file = await app.files.lookup(req.params.code)
    } catch (err) {
      if (err instanceof FileNotFound) return answerError(err, req, reply, config.htmlErrors)
      throw err
    }
    fileHeaders(reply, file, fileETag(file), file.size)
    return reply.send()
  })
}
export default downloadRoutes
