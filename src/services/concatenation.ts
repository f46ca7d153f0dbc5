/**
 * tus concatenation: parallel uploads. A client (tus-js-client's `parallelUploads: N`) creates N
 * partial uploads, each a resumable session of its own (`ResumableInfo.partial`), that fill in
 * parallel on any instances and are never published by themselves; then one final upload that
 * names them in order. The final:
 * - opens a session of its own (a place among the key's open sessions, its object key in the
 *   cleanup index) and takes each partial's completion lease, so no append runs in a partial
 *   meanwhile and no other final uses it (423 while another request holds one); each partial must
 *   hold its whole length (400 otherwise: concatenation of unfinished uploads is not offered);
 * - settles each partial's storage into its own object (S3: CompleteMultipartUpload, fs: a
 *   rename; nothing copied) and builds its own object from them (`BlobStore.concatenate`: S3
 *   copies inside the bucket, fs links their files as its parts; no byte passes through the
 *   service). A partial's appends were not hashed as they arrived (appends.ts): the final's
 *   SHA-256 is the one pass over its bytes in order, reading the object back (fs: from the page
 *   cache where the partials were just written);
 * - publishes it as any upload (same SHA-256 from the stored bytes, the final's metadata), moves
 *   the partials' bytes in the key's quota to the file, finishes every partial (HEAD of one then
 *   answers the final's code) and deletes their objects.
 * A final that dies midway leaves its leases to run out; a retry starts again (a partial whose
 * storage was settled already is found whole, as sessions.ts's `assemble` finds it).
 */
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { BlobStore } from '../blob/index.js'
import { DropcodeError } from '../core/errors.js'
import { maskSecret } from '../core/mask.js'
import type { ChunkRecord, ResumableInfo, UploadSession } from '../core/model.js'
import type { CompletedFile, SessionStore } from '../state/index.js'
import { leaseInTheWay, progressOf } from './appends.js'
import type { FileService } from './files.js'
import { overLimit, whose, type ApiKey } from './keys.js'
import { fileItem, sessionItem, type Quota } from './quota.js'

export interface ConcatenationContext {
  blobs: BlobStore
  sessions: SessionStore
  files: FileService
  quota: Quota
  log: FastifyBaseLogger
  now: () => number
  ttl: number
  lockMs: number
  keepCompletion: (id: string, token: string) => { stop: () => void, confirm: () => Promise<void> }
  /** Storage of a session's chunks as one object (sessions.ts `assemble`). */
  assemble: (session: UploadSession, ordered: ChunkRecord[], size: number) => Promise<{ size: number, sha256?: string }>
  /** The SHA-256 of an object, read back (sessions.ts `digestOf` without a prefix). */
  digest: (blobKey: string, fromDriver: string | undefined, size: number) => Promise<string>
  /** Opens a session (sessions.ts `start`). */
  start: (settings: FinalSettings, key: ApiKey) => Promise<string>
}

export interface FinalSettings {
  filename: string
  totalChunks: number
  maxDownloads: number
  expiryHours: number
  sha256?: string | undefined
  resumable: ResumableInfo
}

/** A partial upload held for the final: its session, its appends in order, its lease. */
interface Held { id: string, session: UploadSession, ordered: ChunkRecord[], size: number, lease: ReturnType<ConcatenationContext['keepCompletion']>, token: string }

export function createConcatenation (ctx: ConcatenationContext) {
  const { sessions, blobs, now, ttl, lockMs } = ctx

  /** Takes partial `id`'s completion lease and checks it holds its whole length. */
  async function hold (id: string, key: ApiKey): Promise<Held> {
    const token = randomBytes(12).toString('base64url')
    const begun = await sessions.beginCompletion(id, now(), now() + lockMs, key.name, token, ttl)
    if (begun.status === 'busy') {
      throw leaseInTheWay('DROPCODE_UPLOAD_LOCKED', begun.until, now(), seconds => `Partial upload ${id} is being appended to or concatenated by another request; retry in ${seconds} s.`)
    }
    if (begun.status !== 'open') {
      throw new DropcodeError('DROPCODE_INVALID_FIELD', `Upload-Concat names /files/${id}, which is not a partial upload in progress of this key (unknown, expired, or used by a final upload already).`)
    }
    const release = async () => { await sessions.releaseCompletion(id, now(), token).catch(() => {}) }
    const info = JSON.parse(begun.session.resumable ?? '{}') as ResumableInfo
    if (info.partial !== true) {
      await release()
      throw new DropcodeError('DROPCODE_INVALID_FIELD', `Upload-Concat names /files/${id}, which was not created with Upload-Concat: partial.`)
    }
    const p = progressOf({ session: begun.session, chunks: begun.chunks })
    if (p.length === undefined || p.offset !== p.length) {
      await release()
      throw new DropcodeError('DROPCODE_INVALID_FIELD', `Partial upload /files/${id} holds ${p.offset} of its ${p.length ?? 'undeclared'} bytes; finish it first.`)
    }
    const ordered = [...Array(begun.chunks.size).keys()].map(i => begun.chunks.get(i)!)
    return { id, session: begun.session, ordered, size: p.offset, lease: ctx.keepCompletion(id, token), token }
  }

  return {
    /**
     * Creates the final upload of `partials` (ids, in order) and completes it at once.
     * @returns its id and the published file
     */
    async concatenate (partials: string[], key: ApiKey, settings: Omit<FinalSettings, 'resumable' | 'totalChunks'> & { metadata?: string | undefined }): Promise<{ id: string, completed: CompletedFile }> {
      if (new Set(partials).size !== partials.length) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Upload-Concat names a partial upload twice.')
      const held: Held[] = []
      let id: string | undefined
      try {
        for (const id of partials) held.push(await hold(id, key))
        const size = held.reduce((n, h) => n + h.size, 0)
        const { maxFileSize } = key.limits
        if (size > maxFileSize) throw overLimit(key, 'maxFileSize', 'DROPCODE_FILE_TOO_LARGE', `The partial uploads add up to ${size} bytes, more than ${whose(key, 'maxFileSize')}'s file limit of ${maxFileSize} bytes.`)
        id = await ctx.start({
          filename: settings.filename,
          totalChunks: 0,
          maxDownloads: settings.maxDownloads,
          expiryHours: settings.expiryHours,
          sha256: settings.sha256,
          resumable: { length: size, final: partials, ...(settings.metadata !== undefined ? { metadata: settings.metadata } : {}) }
        }, key)
        const final = (await sessions.get(id, now()))!.session
        // Each partial's bytes as one object of its own, then the final's from them.
        for (const h of held) await ctx.assemble(h.session, h.ordered, h.size)
        const built = await blobs.concatenate(final.blobKey, final.handle, held.map(h => ({ key: h.session.blobKey, size: h.size })))
        const sha256 = await ctx.digest(final.blobKey, built.sha256, size)
        if (settings.sha256 !== undefined && settings.sha256 !== sha256) {
          await ctx.files.discard({ key: final.blobKey, size, sha256, filename: final.filename })
          await sessions.remove(id)
          throw new DropcodeError('DROPCODE_DIGEST_MISMATCH', 'The concatenated file\'s SHA-256 differs from the one declared; it was not stored (the partial uploads are kept).', { declared_sha256: settings.sha256, sha256 })
        }
        for (const h of held) await h.lease.confirm()
        const file = await ctx.files.publish({ key: final.blobKey, size, sha256, filename: final.filename }, {
          maxDownloads: final.maxDownloads,
          expiryHours: final.expiryHours,
          keyName: key.name
        }, 'chunked')
        const completed = { code: file.code, size, sha256 }
        await sessions.finish(id, completed, now(), ttl)
        await ctx.quota.move(key.name, held.map(h => sessionItem(h.id)), fileItem(file.code), size, file.expiresAt)
        for (const h of held) {
          await sessions.finish(h.id, completed, now(), ttl).catch(err => { ctx.log.warn({ err, uploadId: maskSecret(h.id) }, 'could not finish a concatenated partial upload; it expires') })
          await blobs.delete(h.session.blobKey).catch(err => { ctx.log.warn({ err }, 'could not delete a concatenated partial upload\'s object; the sweeper removes it') })
        }
        return { id, completed }
      } catch (err) {
        for (const h of held) await sessions.releaseCompletion(h.id, now(), h.token).catch(() => {})
        // The final's place goes back; what it stored, the sweeper removes (its object key is indexed).
        if (id !== undefined && !(err instanceof DropcodeError && err.code === 'DROPCODE_DIGEST_MISMATCH')) await sessions.remove(id).catch(() => {})
        throw err
      } finally {
        for (const h of held) h.lease.stop()
      }
    }
  }
}
