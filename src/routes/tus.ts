/**
 * tus 1.0.0 on /files/ (https://tus.io/protocols/resumable-upload), so the clients people
 * already use (tus-js-client, Uppy, TUSKit, tuspy, …) upload to dropcode unchanged. Extensions:
 * creation, creation-with-upload, creation-defer-length, termination, expiration (an upload
 * lives SESSION_TTL_SECONDS after its last append: Upload-Expires), checksum (sha1, sha256, md5;
 * 460 keeps nothing of that append), concatenation (parallel uploads: partial uploads fill on
 * any instances at once, the final one completes at its creation: services/concatenation.ts).
 *
 * An upload is a chunked session without a chunk count (services/appends.ts): it answers only the
 * key that created it (X-Client-Key, as everywhere), counts toward its open sessions and quota,
 * and when its last byte is stored it is published as /upload publishes a file (same SHA-256
 * from the stored bytes, same limits, same record); its code comes back in `Dropcode-Code` on
 * the request that completed it and on HEAD afterwards (for as long as /upload/verify reports
 * a completed session). Upload-Metadata carries `filename` (or `name`, as Uppy sends it),
 * `max_downloads`, `expiry_hours` and `sha256`, checked as /upload's form fields are.
 * X-HTTP-Method-Override on a POST to an upload makes it a PATCH, HEAD or DELETE.
 * A request with a supported `Upload-Draft-Interop-Version` speaks the IETF resumable-upload
 * draft instead (routes/ietf-draft.ts): no Tus-Resumable, errors as problem details.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import { Type } from 'typebox'
import type { Config } from '../config.js'
import { DropcodeError } from '../core/errors.js'
import { parseFields } from '../http/form-fields.js'
import { admitBody, declaredLength } from '../http/multipart-form.js'
import { completedHeaders } from '../http/repr-digest.js'
import { dispositionFilename, INTEROP_VERSIONS, interopVersion } from '../http/ietf-draft.js'
import { CHECKSUM_ALGORITHMS, integerHeader, isOffsetStream, parseChecksum, parseConcat, parseMetadata, TUS_VERSION } from '../http/tus-headers.js'
import type { AppendRequest, UploadProgress } from '../services/appends.js'
import { ietfDraftHandlers } from './ietf-draft.js'
import { fileSettings, reserveRoom } from './key-limits.js'
import { errorResponses, uploadFields } from './schemas.js'

const EXTENSIONS = 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum,concatenation'
const UploadParams = Type.Object({ id: Type.String({ pattern: '^[A-Za-z0-9_-]{22}$', description: 'The upload\'s id (the last segment of its Location).' }) })

const tusRoutes: FastifyPluginAsyncTypebox<{ config: Pick<Config, 'limits' | 'sessionTtlMs'> }> = async (app, { config }) => {
  const MetadataFields = uploadFields(config.limits)
  // Bodies are read by the handlers as they stream (appends), or not at all.
  app.addContentTypeParser('*', (_req, _payload, done) => { done(null) })
  app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'OPTIONS') return
    const draft = interopVersion(req)
    if (typeof draft === 'number') {
      ietf.adopt(req, reply, draft)
      return
    }
    if (req.headers['tus-resumable'] !== TUS_VERSION || draft === 'unsupported') {
      reply.header('tus-version', TUS_VERSION)
      throw new DropcodeError('DROPCODE_TUS_VERSION', draft === 'unsupported'
        ? `This service speaks tus 1.0.0 and the resumable-upload draft's interop versions ${INTEROP_VERSIONS.join(', ')} (Upload-Draft-Interop-Version).`
        : undefined)
    }
  })
  app.addHook('onSend', (req, reply, payload, done) => {
    if (req.problem === null) reply.header('tus-resumable', TUS_VERSION)
    done(null, payload)
  })

  const common = { tags: ['tus'], security: [{ apiKey: [] }] }
  const guards: onRequestAsyncHookHandler[] = [app.keyGuard, app.rateLimits.uploads]
  const bodyGuards = [reserveRoom(app, key => key.limits.maxFileSize), app.transferSlots.upload]
  // A file is one upload for the key's uploads_per_minute: its partial uploads (parallel ones)
  // are not counted, its final one is.
  const newUpload: onRequestAsyncHookHandler = async function newUpload (req, reply) {
    if (req.headers['upload-concat'] !== 'partial') await app.rateLimits.newUploads.call(this, req, reply)
  }
  const expires = () => new Date(Date.now() + config.sessionTtlMs).toUTCString()

  /** The headers of where an upload stands (HEAD, and the answers of appends). */
  function progressHeaders (reply: FastifyReply, p: UploadProgress) {
    reply.header('upload-offset', String(p.offset))
    if (p.length !== undefined) reply.header('upload-length', String(p.length))
    if (p.completed !== undefined) {
      completedHeaders(reply, p.completed)
    } else {
      reply.header('upload-expires', expires())
    }
  }

  /** Streams the request's body as one append. */
  async function append (req: FastifyRequest, reply: FastifyReply, id: string, request: AppendRequest): Promise<UploadProgress> {
    const ticket = await admitBody(req, reply, app.files.admit)
    try {
      const progress = await app.sessions.append(id, req.raw, req.apiKey!, request, { maxLength: declaredLength(req), ticket, hold: req.hold ?? undefined })
      if (progress.completed !== undefined) req.log.info({ size: progress.completed.size }, req.problem === null ? 'file uploaded (tus)' : 'file uploaded (IETF draft)')
      return progress
    } catch (err) {
      // 409 says where the upload ends, for the client to resume from.
      if (err instanceof DropcodeError && typeof err.details?.offset === 'number') reply.header('upload-offset', String(err.details.offset))
      throw err
    } finally {
      ticket?.release()
    }
  }

  /** Appends the request's body at its Upload-Offset, as tus asks. */
  const tusAppend = async (req: FastifyRequest, reply: FastifyReply, id: string, offset: number) =>
    await append(req, reply, id, { offset, length: integerHeader(req, 'Upload-Length'), checksum: parseChecksum(req) })

  async function patch (req: FastifyRequest, reply: FastifyReply, id: string) {
    const draft = interopVersion(req)
    if (typeof draft === 'number') return await ietf.patch(req, reply, draft, id)
    if (!isOffsetStream(req)) throw new DropcodeError('DROPCODE_UNSUPPORTED_MEDIA_TYPE')
    const offset = integerHeader(req, 'Upload-Offset')
    if (offset === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Header Upload-Offset is required.')
    // Completing a large upload can keep the socket silent a while (S3 completing its parts).
    req.allowSilence()
    progressHeaders(reply, await tusAppend(req, reply, id, offset))
    return await reply.code(204).send()
  }

  async function head (req: FastifyRequest, reply: FastifyReply, id: string) {
    const draft = interopVersion(req)
    if (typeof draft === 'number') return await ietf.head(req, reply, draft, id)
    const p = await app.sessions.progress(id, req.apiKey!)
    progressHeaders(reply, p)
    if (p.length === undefined) reply.header('upload-defer-length', '1')
    if (p.metadata !== undefined) reply.header('upload-metadata', p.metadata)
    if (p.partial === true) reply.header('upload-concat', 'partial')
    reply.header('cache-control', 'no-store')
    return await reply.code(200).send()
  }

  async function terminate (req: FastifyRequest, reply: FastifyReply, id: string) {
    const draft = interopVersion(req)
    if (typeof draft === 'number') return await ietf.cancel(req, reply, draft, id)
    await app.sessions.terminate(id, req.apiKey!)
    return await reply.code(204).send()
  }

  /**
   * A new upload's settings: Upload-Metadata's (filename or name, max_downloads, expiry_hours,
   * sha256); a draft request without a filename there may name it in Content-Disposition.
   */
  function creationSettings (req: FastifyRequest) {
    const rawMetadata = req.headers['upload-metadata'] as string | undefined
    const metadata = parseMetadata(rawMetadata)
    const fields = parseFields(MetadataFields, { max_downloads: metadata.max_downloads, expiry_hours: metadata.expiry_hours, sha256: metadata.sha256 })
    const { maxDownloads, expiryHours } = fileSettings(req, { maxDownloads: fields.max_downloads, expiryHours: fields.expiry_hours })
    const given = metadata.filename ?? metadata.name ?? (req.problem !== null ? dispositionFilename(req) : undefined)
    const filename = given !== undefined && given.trim() !== '' ? given : 'upload'
    return { rawMetadata, filename, maxDownloads, expiryHours, sha256: fields.sha256?.toLowerCase() }
  }

  async function start (req: FastifyRequest, length: number | undefined, partial = false): Promise<string> {
    const { rawMetadata, filename, maxDownloads, expiryHours, sha256 } = creationSettings(req)
    return await app.sessions.start({
      filename,
      totalChunks: 0,
      maxDownloads,
      expiryHours,
      sha256,
      resumable: { ...(length !== undefined ? { length } : {}), ...(rawMetadata !== undefined ? { metadata: rawMetadata } : {}), ...(partial ? { partial: true } : {}) }
    }, req.apiKey!)
  }

  const ietf = ietfDraftHandlers({
    sessionTtlMs: config.sessionTtlMs,
    progress: async (id, key) => await app.sessions.progress(id, key),
    start: async (req, length) => await start(req, length),
    append,
    terminate: async (id, key) => { await app.sessions.terminate(id, key) }
  })

  const options = (_req: FastifyRequest, reply: FastifyReply) => {
    reply.header('tus-version', TUS_VERSION)
    reply.header('tus-extension', EXTENSIONS)
    reply.header('tus-max-size', String(config.limits.maxFileSize))
    reply.header('tus-checksum-algorithm', Object.keys(CHECKSUM_ALGORITHMS).join(','))
    // The IETF draft's limits (interop versions 6 and 8 parse this alike).
    reply.header('upload-limit', `max-size=${config.limits.maxFileSize}`)
    return reply.code(204).send()
  }
  app.options('/files/', { schema: { hide: true } }, options)
  app.options('/files/:id', { schema: { hide: true } }, options)

  app.post('/files/', {
    config: { crossOrigin: true },
    onRequest: [...guards, newUpload, ...bodyGuards],
    schema: {
      ...common,
      summary: 'tus: create an upload (creation, creation-with-upload, creation-defer-length)',
      description: 'Upload-Length (or Upload-Defer-Length: 1) and Upload-Metadata (filename, max_downloads, expiry_hours, sha256). 201 with Location; with a body (Content-Type: application/offset+octet-stream) its first bytes are stored too.',
      response: { ...errorResponses(400, 401, 403, 412, 413, 429, 500, 503, 507) }
    }
  }, async (req, reply) => {
    const draft = interopVersion(req)
    if (typeof draft === 'number') return await ietf.create(req, reply, draft)
    const length = integerHeader(req, 'Upload-Length')
    const deferred = req.headers['upload-defer-length']
    const concat = parseConcat(req)
    const { rawMetadata, filename, maxDownloads, expiryHours, sha256 } = creationSettings(req)
    if (concat !== undefined && concat !== 'partial') {
      // The final upload: its length is its partials', and it completes now.
      if (length !== undefined || deferred !== undefined) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'A final upload (Upload-Concat: final;…) takes its length from its partial uploads: send no Upload-Length.')
      const final = await app.sessions.concatenate(concat, req.apiKey!, { filename, maxDownloads, expiryHours, sha256, metadata: rawMetadata })
      reply.header('location', `/files/${final.id}`)
      progressHeaders(reply, { offset: final.completed.size, length: final.completed.size, metadata: rawMetadata, completed: final.completed })
      req.log.info({ size: final.completed.size, partials: concat.length }, 'file uploaded (tus concatenation)')
      return await (reply as FastifyReply).code(201).send()
    }
    if (length === undefined && deferred !== '1') throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Send Upload-Length, or Upload-Defer-Length: 1.')
    if (length !== undefined && deferred !== undefined) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Send Upload-Length or Upload-Defer-Length, not both.')
    const id = await start(req, length, concat === 'partial')
    reply.header('location', `/files/${id}`)
    if (isOffsetStream(req) && declaredLength(req) !== 0) {
      req.allowSilence()
      progressHeaders(reply, await tusAppend(req, reply, id, 0))
    } else {
      reply.header('upload-expires', expires())
      if (length === 0) progressHeaders(reply, await tusAppend(req, reply, id, 0))
    }
    // (The route's typed reply wants a body; a 201 of tus has none.)
    return await (reply as FastifyReply).code(201).send()
  })

  const withId = { config: { crossOrigin: true }, schema: { ...common, params: UploadParams } }
  app.head('/files/:id', {
    ...withId,
    onRequest: guards,
    schema: { ...withId.schema, summary: 'tus: where an upload stands (Upload-Offset, Upload-Length; Dropcode-Code once complete)', response: { ...errorResponses(401, 404, 412, 429, 503) } }
  }, async (req, reply) => await head(req, reply, req.params.id))

  app.patch('/files/:id', {
    ...withId,
    onRequest: [...guards, ...bodyGuards],
    schema: { ...withId.schema, summary: 'tus: append bytes at Upload-Offset (Content-Type: application/offset+octet-stream; Upload-Checksum optional)', response: { ...errorResponses(400, 401, 403, 404, 409, 412, 413, 415, 423, 429, 460, 500, 503, 507) } }
  }, async (req, reply) => await patch(req, reply, req.params.id))

  app.delete('/files/:id', {
    ...withId,
    onRequest: guards,
    schema: { ...withId.schema, summary: 'tus: terminate an upload in progress', response: { ...errorResponses(401, 404, 412, 429, 503) } }
  }, async (req, reply) => await terminate(req, reply, req.params.id))

  // X-HTTP-Method-Override: for clients and proxies that can send only GET and POST.
  app.post('/files/:id', {
    ...withId,
    onRequest: [...guards, ...bodyGuards],
    schema: { ...withId.schema, summary: 'tus: PATCH, HEAD or DELETE sent as a POST with X-HTTP-Method-Override', response: { ...errorResponses(400, 401, 404, 409, 412, 413, 415, 423, 429, 460, 500, 503, 507) } }
  }, async (req, reply) => {
    const method = String(req.headers['x-http-method-override'] ?? '').toUpperCase()
    if (method === 'PATCH') return await patch(req, reply, req.params.id)
    if (method === 'HEAD') return await head(req, reply, req.params.id)
    if (method === 'DELETE') return await terminate(req, reply, req.params.id)
    throw new DropcodeError('DROPCODE_INVALID_FIELD', 'A POST to an upload needs X-HTTP-Method-Override: PATCH, HEAD or DELETE.')
  })
}
export default tusRoutes
