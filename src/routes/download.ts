/**
 * GET and HEAD /download/{code}. GET claims a download before the first byte; HEAD only looks
 * (it never consumes a download). Failures answer an HTML page (config.htmlErrors).
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { attachmentDisposition } from '../http/content-disposition.js'
import { isCode } from '../ids.js'
import { FileNotFound } from '../services/files.js'
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

/** The path parameter, checked against the code format before any store sees it. */
function codeParam (params: unknown): string {
  const { code } = params as { code: string }
  if (!isCode(code)) throw new FileNotFound('unknown')
  return code
}

export default async function downloadRoutes (app: FastifyInstance) {
  const config = { htmlErrors: true }

  app.get('/download/:code', { config, exposeHeadRoute: false }, async (req, reply) => {
    const download = await app.files.startDownload(codeParam(req.params))
    reply.raw.once('close', () => download.finish())
    fileHeaders(reply, download.file)
    return reply.send(download.body)
  })

  app.head('/download/:code', { config }, async (req, reply) => {
    fileHeaders(reply, await app.files.lookup(codeParam(req.params)))
    return reply.send()
  })
}
