/**
 * Uploading a file, without any DOM: small files (up to one chunk) in one POST /upload with
 * their SHA-256, larger ones through the chunked API (chunked.ts: several chunks in flight,
 * each with its SHA-256, resumable after a network drop or a page reload).
 *
 * The whole file's SHA-256 is not declared at /upload/start: Web Crypto hashes only whole
 * buffers, so it would take a JavaScript SHA-256 and a full read of the file before the first
 * byte is sent. Each chunk's digest is declared instead (the service refuses a damaged chunk),
 * every chunk the service holds is compared with the file before completing, and the service's
 * own SHA-256 of the stored file is shown with the code.
 */
import type { Field, Limits } from './api.js'
import { ChunkedUpload, startSession } from './chunked.js'
import { Context, failure, read, result, UploadFailure, type Hooks, type Result, type Settings } from './context.js'
import { formatBytes, sha256Hex } from './format.js'
import type { Pending } from './store.js'

export { UploadFailure, type Progress, type Result } from './context.js'

const MiB = 1024 * 1024
/** Preferred chunk size: at least 5 MiB, so on S3 each chunk is a multipart part (nothing is copied at completion). */
export const CHUNK_SIZE = 8 * MiB

export type Plan =
  | { mode: 'single' }
  | { mode: 'chunked', chunkSize: number, totalChunks: number }
  | { mode: 'too-large', limit: number }

/** How a file of `size` bytes goes up, or that it is too large (known before sending anything). */
export function plan (size: number, limits: Limits): Plan {
  if (size > limits.max_file_size) return { mode: 'too-large', limit: limits.max_file_size }
  const preferred = Math.min(CHUNK_SIZE, limits.max_chunk_size)
  if (size <= preferred) return { mode: 'single' }
  // More chunks than the service takes: make them larger, up to its chunk limit.
  const chunkSize = Math.max(preferred, Math.ceil(size / limits.max_total_chunks))
  if (chunkSize > limits.max_chunk_size) return { mode: 'too-large', limit: limits.max_chunk_size * limits.max_total_chunks }
  return { mode: 'chunked', chunkSize, totalChunks: Math.ceil(size / chunkSize) }
}

/** Uploads `file`; with `resume`, continues that session (the same file, picked again). */
export async function uploadFile (file: File, settings: Settings, hooks: Hooks, resume?: Pending): Promise<Result> {
  const ctx = new Context(settings, hooks)
  if (resume !== undefined) return await new ChunkedUpload(file, ctx, resume).run()
  const p = plan(file.size, settings.limits)
  if (p.mode === 'too-large') throw tooLarge(file.size, p.limit)
  if (p.mode === 'single') return await uploadSingle(file, ctx)
  const { maxDownloads, expiryHours } = settings
  const pending = await startSession(file, ctx, { chunkSize: p.chunkSize, totalChunks: p.totalChunks, maxDownloads, expiryHours })
  return await new ChunkedUpload(file, ctx, pending).run()
}

export function tooLarge (size: number, limit: number): UploadFailure {
  return new UploadFailure('too-large', `This file is ${formatBytes(size)}; this service accepts files up to ${formatBytes(limit)}. Nothing was sent.`)
}

async function uploadSingle (file: File, ctx: Context): Promise<Result> {
  const { maxDownloads, expiryHours } = ctx.settings
  const data = await read(file)
  const sha256 = await sha256Hex(data)
  const fields: Field[] = [['max_downloads', String(maxDownloads)], ['expiry_hours', String(expiryHours)]]
  if (sha256 !== undefined) fields.push(['sha256', sha256])
  fields.push(['file', new Blob([data], { type: file.type }), file.name])
  const report = (sent: number) => ctx.hooks.progress({ done: Math.min(sent, file.size), total: file.size, transferred: ctx.transferred })
  const a = await ctx.send('/upload', fields, report)
  if (a.status !== 200) throw failure(a)
  ctx.hooks.progress({ done: file.size, total: file.size, transferred: ctx.transferred })
  return result(a, file.name, maxDownloads, expiryHours)
}
