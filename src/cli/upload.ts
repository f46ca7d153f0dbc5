/**
 * `dropcode upload`: one request for what fits in a chunk, else a chunked session with
 * `--parallel` chunks in flight. Every byte is covered by a digest the service checks: the
 * file's `sha256` (on /upload after the file part; at /upload/start for a session, so the input
 * is read once to hash it and once to send it) and each chunk's `chunk_sha256`.
 *
 * Resuming: a session's id is kept in a state file (state.ts) named by the server URL, the
 * input's absolute path, its size and mtime (a directory: its tar's size and SHA-256) and the
 * chunk size; a rerun asks /upload/verify and sends only the chunks that are missing or whose
 * SHA-256 differs. Standard input cannot be read twice, so it is one streaming /upload, not
 * resumable and not retried once its bytes started to flow.
 */
import { createHash } from 'node:crypto'
import { Transform } from 'node:stream'
import type { UploadArgs } from './args.js'
import { CliError, EXIT } from './exit-codes.js'
import type { Client } from './http.js'
import { Multipart } from './multipart.js'
import { progress as makeProgress, type Progress } from './progress.js'
import { digest, openSource, readChunks, type Digests, type Source } from './source.js'
import { StateFile, stateWarning } from './state.js'

export interface UploadResult {
  code: string
  size: number
  sha256: string
  name: string
  expiry_hours: number
  /** Computed here from expiry_hours (ISO 8601); the service's clock decides. */
  expires_at: string
}

interface UploadState {
  uploadId: string
  sha256: string
  size: number
  chunkSize: number
  maxDownloads: number | undefined
  expiryHours: number | undefined
}

interface Answer { code: string, size: number, sha256: string }

export async function upload (args: UploadArgs, client: Client): Promise<UploadResult> {
  const source = await openSource(args.path, args.name)
  let answer: Answer
  let digests: Digests | undefined
  if (source.kind === 'stdin') {
    answer = await single(args, client, source, undefined)
  } else if (source.kind === 'file' && source.size! <= args.chunkSize) {
    answer = await single(args, client, source, undefined)
  } else {
    // A directory's size is known only now; chunk digests are needed only to resume a session.
    digests = await digest(source, args.chunkSize, await uploadState(args, client, source).read() !== undefined)
    answer = digests.size <= args.chunkSize
      ? await single(args, client, source, digests)
      : await chunked(args, client, source, digests)
  }
  if (digests !== undefined && answer.sha256 !== digests.sha256) {
    throw new CliError(EXIT.INTEGRITY, `the service stored SHA-256 ${answer.sha256}, the input has ${digests.sha256}`)
  }
  const expiryHours = args.expiryHours ?? 24
  return { code: answer.code, size: answer.size, sha256: answer.sha256, name: source.name, expiry_hours: expiryHours, expires_at: new Date(Date.now() + expiryHours * 3_600_000).toISOString() }
}

/** POST /upload, the file streamed with its SHA-256 sent after it (or before, when known). */
async function single (args: UploadArgs, client: Client, source: Source, known: Digests | undefined): Promise<Answer> {
  const progress = makeProgress('upload', known?.size ?? source.size, args)
  let hash = createHash('sha256')
  let sent = 0
  const open = () => {
    progress.add(-sent)
    sent = 0
    hash = createHash('sha256')
    const input = source.open()
    const meter = new Transform({
      transform (data: Buffer, _enc, done) {
        hash.update(data)
        sent += data.length
        progress.add(data.length)
        done(null, data)
      }
    })
    input.on('error', err => meter.destroy(err)) // pipe() alone would leave the body hanging
    return input.pipe(meter)
  }
  const form = new Multipart().field('max_downloads', args.maxDownloads).field('expiry_hours', args.expiryHours)
  if (known !== undefined) form.field('sha256', known.sha256)
  form.file('file', source.name, { length: known?.size ?? source.size, open })
  let actual = ''
  if (known === undefined) form.lateField('sha256', 64, () => { actual = hash.digest('hex'); return actual })
  const stdin = source.kind === 'stdin'
  const answer = await client.json<Answer>('upload', 'POST', '/upload', form, { retry: !stdin, digestRetry: !stdin })
  progress.done()
  if (known === undefined && answer.sha256 !== actual) throw new CliError(EXIT.INTEGRITY, `the service stored SHA-256 ${answer.sha256}, ${actual} was sent`)
  return answer
}

/**
 * What makes a rerun "the same upload": server, input path, a file's size and mtime, the chunk
 * size. (A directory's tar size is known only after the hashing pass; the saved state's size
 * and SHA-256 are compared with it before the session is reused.)
 */
function stateIdentity (client: Client, source: Source, chunkSize: number): unknown[] {
  return [client.base.href, source.kind, source.path, source.kind === 'file' ? source.size : 'dir', source.kind === 'file' ? source.mtimeMs : 0, chunkSize]
}

/** Bound to the key: another key's session is never resumed (nor its file found). */
const uploadState = (args: UploadArgs, client: Client, source: Source) =>
  new StateFile<UploadState>('upload', stateIdentity(client, source, args.chunkSize), { key: args.key, warn: stateWarning(args) })

async function chunked (args: UploadArgs, client: Client, source: Source, digests: Digests): Promise<Answer> {
  const { size } = digests
  const total = Math.ceil(size / args.chunkSize)
  const state = uploadState(args, client, source)
  const wanted = { sha256: digests.sha256, size, chunkSize: args.chunkSize, maxDownloads: args.maxDownloads, expiryHours: args.expiryHours }
  const progress = makeProgress('upload', size, args)

  let uploadId: string | undefined
  let missing: number[] = []
  const saved = await state.read()
  if (saved !== undefined && JSON.stringify({ ...saved, uploadId: undefined }) === JSON.stringify({ ...wanted, uploadId: undefined })) {
    const resumed = await resume(client, saved.uploadId, digests.chunks ?? [])
    if (resumed !== undefined && 'code' in resumed) {
      await state.remove()
      return resumed
    }
    if (resumed !== undefined) {
      uploadId = saved.uploadId
      missing = resumed.missing
      progress.note(`resuming upload: ${total - missing.length} of ${total} chunks already sent`)
      progress.skip(size - missing.reduce((n, i) => n + Math.min(args.chunkSize, size - i * args.chunkSize), 0))
    }
  }
  if (uploadId === undefined) {
    const form = new Multipart().field('filename', source.name).field('total_chunks', total)
      .field('max_downloads', args.maxDownloads).field('expiry_hours', args.expiryHours).field('sha256', digests.sha256)
    uploadId = (await client.json<{ upload_id: string }>('upload start', 'POST', '/upload/start', form)).upload_id
    await state.write({ uploadId, ...wanted })
    missing = Array.from({ length: total }, (_, i) => i)
  }

  await sendChunks(args, client, source, digests, uploadId, missing, progress)
  const form = new Multipart().field('upload_id', uploadId)
  try {
    const answer = await client.json<Answer>('upload complete', 'POST', '/upload/complete', form)
    progress.done()
    await state.remove()
    return answer
  } catch (err) {
    // A digest mismatch closes the session; a vanished session cannot be completed either.
    if (err instanceof CliError && (err.exitCode === EXIT.INTEGRITY || err.exitCode === EXIT.NOT_FOUND)) await state.remove()
    throw err
  }
}

/**
 * What is left of a saved session: the chunks to send (missing, or stored with another
 * SHA-256), its answer if it was completed already (a repeated complete answers the same code),
 * or undefined when it is gone.
 */
async function resume (client: Client, uploadId: string, chunks: string[]): Promise<{ missing: number[] } | Answer | undefined> {
  const form = new Multipart().field('upload_id', uploadId)
  try {
    const v = await client.json<{ missing_chunks: number[], chunks: Array<{ index: number, sha256: string }> }>('upload verify', 'POST', '/upload/verify', form)
    const stored = new Map(v.chunks.map(c => [c.index, c.sha256]))
    return { missing: chunks.map((sha, i) => stored.get(i) === sha ? -1 : i).filter(i => i >= 0) }
  } catch (err) {
    if (!(err instanceof CliError) || err.exitCode !== EXIT.NOT_FOUND) throw err
  }
  try {
    return await client.json<Answer>('upload complete', 'POST', '/upload/complete', new Multipart().field('upload_id', uploadId))
  } catch (err) {
    if (err instanceof CliError && err.exitCode === EXIT.NOT_FOUND) return undefined
    throw err
  }
}

/** Sends `missing` with at most `--parallel` requests (and chunk buffers) at once. */
async function sendChunks (args: UploadArgs, client: Client, source: Source, digests: Digests, uploadId: string, missing: number[], progress: Progress) {
  const running = new Set<Promise<void>>()
  let failure: unknown
  for await (const { index, data } of readChunks(source, args.chunkSize, digests.size, missing)) {
    if (failure !== undefined) break
    const form = new Multipart().field('upload_id', uploadId).field('chunk_index', index)
      .field('chunk_sha256', digests.chunks?.[index] ?? createHash('sha256').update(data).digest('hex')).file('chunk', source.name, data)
    const p: Promise<void> = client.json(`chunk ${index}`, 'POST', '/upload/chunk', form, { digestRetry: true })
      .then(() => progress.add(data.length), (err: unknown) => { failure ??= err })
      .finally(() => running.delete(p))
    running.add(p)
    if (running.size >= args.parallel) await Promise.race(running)
  }
  await Promise.all(running)
  if (failure !== undefined) throw failure
}
