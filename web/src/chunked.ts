/**
 * A chunked upload, resumable at any point. One loop: ask /upload/verify what the service
 * holds, send what is missing with PARALLEL chunks in flight (each with its SHA-256), check
 * what it holds against the file (after a reload the person picks the file again), then
 * /upload/complete. A network drop or a busy service pauses the loop (context.ts) and it
 * starts over at verify; a page reload starts it over from the session kept in localStorage.
 */
import { postForm, type Answer, type Field } from './api.js'
import type { VerifyAnswer } from '../../src/api/answers.js'
import { isTransient } from '../../src/api/retry.js'
import { Context, failure, read, result, UploadFailure, type Result } from './context.js'
import { sha256Hex } from './format.js'
import { clearPending, savePending, type Pending } from './store.js'

/** Chunks in flight at once. */
export const PARALLEL = 3
/** A chunk request whose body makes no progress for this long counts as cut. */
const STALL_MS = 60_000

export type SessionShape = Pick<Pending, 'chunkSize' | 'totalChunks' | 'maxDownloads' | 'expiryHours'>

export async function startSession (file: File, ctx: Context, shape: SessionShape): Promise<Pending> {
  const { chunkSize, totalChunks, maxDownloads, expiryHours } = shape
  const a = await ctx.send('/upload/start', [
    ['filename', file.name], ['total_chunks', String(totalChunks)],
    ['max_downloads', String(maxDownloads)], ['expiry_hours', String(expiryHours)],
    // Every chunk but the last is this size: the service can store them in place (fs).
    ['chunk_size', String(chunkSize)]
  ])
  if (a.status !== 200 || typeof a.body.upload_id !== 'string') throw failure(a)
  const pending: Pending = {
    uploadId: a.body.upload_id, name: file.name, size: file.size, lastModified: file.lastModified, chunkSize, totalChunks, maxDownloads, expiryHours
  }
  savePending(pending)
  return pending
}

interface Held { size: number, sha256: string }

/** One chunked session, from verify to complete, resumable at any point. */
export class ChunkedUpload {
  /** What the service holds, by chunk index (from verify and from accepted chunks). */
  private held = new Map<number, Held>()
  /** Held chunks known to match the file (sent by this page, or compared after a reload). */
  private confirmed = new Set<number>()
  /** Bytes sent so far of chunks on their way. */
  private inflight = new Map<number, number>()
  /** Digest mismatches per chunk: a chunk damaged again and again is a failure. */
  private damaged = new Map<number, number>()

  constructor (private readonly file: File, private readonly ctx: Context, private session: Pending) {}

  private size (i: number) {
    return Math.min(this.session.chunkSize, this.file.size - i * this.session.chunkSize)
  }

  private slice (i: number) {
    const start = i * this.session.chunkSize
    return this.file.slice(start, start + this.size(i))
  }

  private report () {
    let done = 0
    for (const i of this.held.keys()) done += this.size(i)
    for (const [i, sent] of this.inflight) if (!this.held.has(i)) done += Math.min(sent, this.size(i))
    this.ctx.hooks.progress({ done, total: this.file.size, transferred: this.ctx.transferred })
  }

  private fields (more: Field[] = []): Field[] {
    return [['upload_id', this.session.uploadId], ...more]
  }

  async run (): Promise<Result> {
    const { ctx } = this
    for (;;) {
      const v = await ctx.send('/upload/verify', this.fields())
      if (v.status === 404) {
        // Gone: expired, and then it starts again; or completed, by a service whose verify
        // predates `completed` (a repeated complete answers the code for a while).
        const c = await ctx.send('/upload/complete', this.fields())
        if (c.status === 200) return this.finish(c)
        ctx.hooks.notice('The upload session had expired; starting it again.')
        this.held.clear()
        this.confirmed.clear()
        this.session = await startSession(this.file, ctx, this.session)
        continue
      }
      if (v.status !== 200) throw failure(v)
      // Completed, its answer lost (a reload, or a drop while it completed): verify has the code.
      if (v.body.completed === true && typeof v.body.code === 'string') return this.finish(v)
      this.held = new Map(((v.body as Partial<VerifyAnswer>).chunks ?? []).map(c => [c.index, { size: c.size, sha256: c.sha256 }]))
      for (const i of this.confirmed) if (!this.held.has(i)) this.confirmed.delete(i)
      this.report()

      const jobs: number[] = []
      for (let i = 0; i < this.session.totalChunks; i++) if (!this.confirmed.has(i)) jobs.push(i)
      if (jobs.length === 0) {
        const c = await ctx.send('/upload/complete', this.fields())
        if (c.status === 200) return this.finish(c)
        if (c.status === 400 && c.body.code === 'DROPCODE_CHUNKS_MISSING') continue
        if (c.status === 404) continue
        throw failure(c)
      }
      const stop = await this.pool(jobs)
      if (stop !== undefined && isTransient(stop.status)) await ctx.pause(stop)
    }
  }

  private finish (c: Answer): Result {
    clearPending()
    this.ctx.hooks.progress({ done: this.file.size, total: this.file.size, transferred: this.ctx.transferred })
    return result(c, this.session.name, this.session.maxDownloads, this.session.expiryHours)
  }

  /**
   * Works through `jobs` with PARALLEL workers. Resolves when all are done, or with the first
   * answer that calls for a new round (network, busy, session gone, damaged chunk): no new
   * chunk starts after it, the ones on their way finish. A failure aborts them all.
   */
  private async pool (jobs: number[]): Promise<Answer | undefined> {
    const inner = new AbortController()
    const outer = this.ctx.signal
    const abort = () => inner.abort(outer.reason)
    outer.addEventListener('abort', abort)
    let next = 0
    let stop: Answer | undefined
    let fatal: unknown
    const worker = async () => {
      while (stop === undefined && fatal === undefined && next < jobs.length) {
        const i = jobs[next++]!
        try {
          // Not `stop ??= await …`: that reads `stop` before awaiting and would overwrite
          // what another worker set meanwhile.
          const answer = this.held.has(i) ? await this.check(i, inner.signal) : await this.send(i, inner.signal)
          if (answer !== undefined) stop ??= answer
        } catch (err) {
          fatal ??= err
          inner.abort(err)
        }
      }
    }
    try {
      await Promise.all(Array.from({ length: Math.min(PARALLEL, jobs.length) }, worker))
    } finally {
      outer.removeEventListener('abort', abort)
    }
    if (outer.aborted) throw outer.reason
    if (fatal !== undefined) throw fatal
    return stop
  }

  /** A chunk the service holds from before: compare it with the file, send it again if it differs. */
  private async check (i: number, signal: AbortSignal): Promise<Answer | undefined> {
    const data = await read(this.slice(i))
    const sha256 = await sha256Hex(data)
    const held = this.held.get(i)!
    if (held.size === data.byteLength && (sha256 === undefined || sha256 === held.sha256)) {
      this.confirmed.add(i)
      return undefined
    }
    this.held.delete(i)
    this.report()
    return await this.send(i, signal, data, sha256)
  }

  private async send (i: number, signal: AbortSignal, data?: ArrayBuffer, sha256?: string): Promise<Answer | undefined> {
    data ??= await read(this.slice(i))
    sha256 ??= await sha256Hex(data)
    const fields = this.fields([['chunk_index', String(i)]])
    if (sha256 !== undefined) fields.push(['chunk_sha256', sha256])
    fields.push(['chunk', new Blob([data]), this.file.name])
    this.inflight.set(i, 0)
    let a: Answer
    try {
      a = await postForm('/upload/chunk', fields, this.ctx.settings.key, {
        signal,
        stallMs: STALL_MS,
        onProgress: this.ctx.meter(sent => {
          this.inflight.set(i, sent)
          this.report()
        })
      })
    } finally {
      this.inflight.delete(i)
    }
    if (a.status === 200) {
      this.held.set(i, { size: data.byteLength, sha256: sha256 ?? '' })
      this.confirmed.add(i)
      this.ctx.recovered()
      this.report()
      return undefined
    }
    this.report()
    if (isTransient(a.status) || (a.status === 404 && a.body.code === 'DROPCODE_SESSION_NOT_FOUND')) return a
    if (a.status === 400 && a.body.code === 'DROPCODE_DIGEST_MISMATCH') {
      const n = (this.damaged.get(i) ?? 0) + 1
      this.damaged.set(i, n)
      if (n < 3) return a
      throw new UploadFailure('rejected', `Chunk ${i + 1} arrived damaged three times; the connection or the file is changing. Try again.`)
    }
    throw failure(a)
  }
}
