/**
 * The IETF draft "Resumable Uploads for HTTP" on tus's resources (routes/tus.ts dispatches a
 * request here when its `Upload-Draft-Interop-Version` is one of http/ietf-draft.ts's): upload
 * creation by POST /files/ with `Upload-Complete`, offset retrieval by HEAD, append by PATCH,
 * cancellation by DELETE; the same services, key, limits and code as tus (the code in
 * `Dropcode-Code`, and as `{ "code" }` in the body of the answer that completed the upload).
 *
 * Where dropcode departs from the text:
 * - an upload whose length is known (Upload-Length, or Content-Length with `Upload-Complete: ?1`)
 *   completes when its offset reaches it, as a tus upload does, even under `Upload-Complete: ?0`;
 *   a later `?1` append at that offset gets the completed answer again;
 * - 104 (Upload Resumption Supported) goes out only where Node can send it
 *   (`ServerResponse.writeInformation`, Node 24.x and later; not on Node 20 or 22): once, with
 *   the Location, when a creation request carries content. No progress 104s. See docs/api.md.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { DropcodeError } from '../core/errors.js'
import { integerHeader } from '../http/tus-headers.js'
import { hasContent, isPartialUpload, problemMembers, uploadComplete, uploadLimit, type InteropVersion, type ProblemName } from '../http/ietf-draft.js'
import { declaredLength } from '../http/multipart-form.js'
import { completedHeaders } from '../http/repr-digest.js'
import type { AppendRequest, UploadProgress } from '../services/appends.js'
import type { ApiKey } from '../services/keys.js'

/** What the draft's handlers take from tus's plugin (routes/tus.ts). */
export interface DraftDeps {
  /** ms an upload lives after its last append. */
  sessionTtlMs: number
  /** Where the upload stands (the service's progress). */
  progress: (id: string, key: ApiKey) => Promise<UploadProgress>
  /** Starts an upload from the creation request's settings (Upload-Metadata, Content-Disposition); resolves with its id. */
  start: (req: FastifyRequest, length: number | undefined) => Promise<string>
  /** Streams the request's body as one append (tus's append: admission, limits, 409's offset). */
  append: (req: FastifyRequest, reply: FastifyReply, id: string, request: AppendRequest) => Promise<UploadProgress>
  terminate: (id: string, key: ApiKey) => Promise<void>
}

const problem = (code: 'DROPCODE_INVALID_FIELD' | 'DROPCODE_BAD_REQUEST', message: string, name: ProblemName, details: Record<string, unknown> = {}) =>
  new DropcodeError(code, message, { ...details, problem: name })

/** Node ≥ 24.x sends an arbitrary 1xx; the types of Node 20 do not know it. */
type Informing = { writeInformation?: (status: number, headers: Record<string, string>) => void }

export function ietfDraftHandlers (deps: DraftDeps) {
  const limitHeader = (reply: FastifyReply, version: InteropVersion, key: ApiKey, open: boolean) => {
    const value = uploadLimit(version, { maxSize: key.limits.maxFileSize, lifeSeconds: open ? deps.sessionTtlMs / 1000 : undefined })
    if (value !== undefined) reply.header('upload-limit', value)
  }

  /** The headers of where an upload stands: on creation, appends and HEAD. */
  function stands (reply: FastifyReply, version: InteropVersion, key: ApiKey, p: UploadProgress) {
    reply.header('upload-offset', String(p.offset))
    reply.header('upload-complete', p.completed !== undefined ? '?1' : '?0')
    if (p.length !== undefined) reply.header('upload-length', String(p.length))
    limitHeader(reply, version, key, p.completed === undefined)
    if (p.completed !== undefined) completedHeaders(reply, p.completed)
  }

  /** Length from `Upload-Complete: ?1` + Content-Length (the rest of the upload after `offset`) and from Upload-Length; they must agree. */
  function lengthOf (req: FastifyRequest, offset: number, complete: boolean): number | undefined {
    const announced = integerHeader(req, 'Upload-Length')
    const rest = declaredLength(req)
    const implied = complete && rest !== undefined ? offset + rest : undefined
    if (announced !== undefined && implied !== undefined && announced !== implied) {
      throw problem('DROPCODE_INVALID_FIELD', `Upload-Length says ${announced} bytes, Upload-Complete: ?1 with Content-Length says ${implied}.`, 'inconsistentLength')
    }
    return announced ?? implied
  }

  /** Appends the body; maps the service's answers to the draft's. */
  async function appendBody (req: FastifyRequest, reply: FastifyReply, id: string, offset: number, complete: boolean, length: number | undefined) {
    req.allowSilence()
    let p: UploadProgress
    try {
      p = await deps.append(req, reply, id, { offset, length, completes: complete })
    } catch (err) {
      if (err instanceof DropcodeError && err.code === 'DROPCODE_OFFSET_MISMATCH') throw new DropcodeError(err.code, err.message, { ...err.details, provided: offset })
      throw err
    }
    if (complete && p.completed === undefined) {
      // `?1` with content that ends short of the length announced before: the bytes are kept.
      reply.header('upload-offset', String(p.offset))
      throw problem('DROPCODE_INVALID_FIELD', `Upload-Complete: ?1, but the upload holds ${p.offset} of its ${String(p.length)} bytes.`, 'inconsistentLength', { offset: p.offset })
    }
    return p
  }

  /** The answer's body when the upload completed: the code, as /upload answers it. */
  const completedBody = (reply: FastifyReply, p: UploadProgress) => p.completed !== undefined
    ? reply.type('application/json; charset=utf-8').send({ code: p.completed.code })
    : reply.send()

  /** HEAD and DELETE carry no upload state (drafts -03 to -05 say to refuse it). */
  function noState (req: FastifyRequest, version: InteropVersion) {
    if (version > 6) return
    for (const name of ['upload-offset', 'upload-complete', ...(version === 6 ? ['upload-length'] : [])]) {
      if (req.headers[name] !== undefined) throw new DropcodeError('DROPCODE_INVALID_FIELD', `This request must not carry ${name}.`)
    }
  }

  return {
    /** Marks the request as the draft's: errors become problem details. */
    adopt (req: FastifyRequest, reply: FastifyReply, version: InteropVersion) {
      req.problem = err => problemMembers(version, err)
      if (req.method === 'POST' || req.method === 'PATCH') reply.header('upload-complete', '?0')
    },

    async create (req: FastifyRequest, reply: FastifyReply, version: InteropVersion) {
      const complete = uploadComplete(req)
      if (complete === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Header Upload-Complete (?0 or ?1) is required to create an upload.')
      if (req.headers['upload-offset'] !== undefined) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'An upload creation must not carry Upload-Offset.')
      const length = lengthOf(req, 0, complete)
      const id = await deps.start(req, length)
      const location = `/files/${id}`
      reply.header('location', location)
      const key = req.apiKey!
      if (hasContent(req)) {
        const limit = uploadLimit(version, { maxSize: key.limits.maxFileSize, lifeSeconds: deps.sessionTtlMs / 1000 })
        const raw = reply.raw as typeof reply.raw & Informing
        raw.writeInformation?.(104, { location, 'upload-draft-interop-version': String(version), ...(limit !== undefined ? { 'upload-limit': limit } : {}) })
      }
      const p = hasContent(req) || complete
        ? await appendBody(req, reply, id, 0, complete, undefined)
        : { offset: 0, length, metadata: undefined }
      stands(reply, version, key, p)
      return await completedBody(reply.code(201), p)
    },

    async head (req: FastifyRequest, reply: FastifyReply, version: InteropVersion, id: string) {
      noState(req, version)
      stands(reply, version, req.apiKey!, await deps.progress(id, req.apiKey!))
      reply.header('cache-control', 'no-store')
      return await reply.code(204).send()
    },

    async patch (req: FastifyRequest, reply: FastifyReply, version: InteropVersion, id: string) {
      if (version >= 6 && !isPartialUpload(req) && (hasContent(req) || req.headers['content-type'] !== undefined)) {
        throw new DropcodeError('DROPCODE_UNSUPPORTED_MEDIA_TYPE', 'An append\'s body must be sent as Content-Type: application/partial-upload.')
      }
      const offset = integerHeader(req, 'Upload-Offset')
      if (offset === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Header Upload-Offset is required.')
      // Drafts -03 to -05 leave Upload-Complete out of an append that does not end the upload.
      const complete = uploadComplete(req) ?? (version < 8 ? false : undefined)
      if (complete === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', 'Header Upload-Complete (?0 or ?1) is required.')
      const length = lengthOf(req, offset, complete)
      const before = await deps.progress(id, req.apiKey!)
      if (before.completed !== undefined && version === 6) {
        // Drafts -04 and -05: a completed upload takes no append (later drafts allow the replay we answer).
        reply.header('upload-complete', '?1')
        throw problem('DROPCODE_BAD_REQUEST', 'This upload is complete already; its code is in Dropcode-Code.', 'completedUpload')
      }
      if (length !== undefined && before.length !== undefined && length !== before.length) {
        throw problem('DROPCODE_INVALID_FIELD', `The upload's length is ${before.length} bytes; this request says ${length}.`, 'inconsistentLength')
      }
      const p = await appendBody(req, reply, id, offset, complete, length)
      stands(reply, version, req.apiKey!, p)
      // Drafts -03 to -05 acknowledge an append with 201; later ones with 204, or 200 with the result.
      const status = version < 8 ? 201 : p.completed !== undefined ? 200 : 204
      return await completedBody(reply.code(status), p)
    },

    async cancel (req: FastifyRequest, reply: FastifyReply, version: InteropVersion, id: string) {
      noState(req, version)
      await deps.terminate(id, req.apiKey!)
      return await reply.code(204).send()
    }
  }
}
