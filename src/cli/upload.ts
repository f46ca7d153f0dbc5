/**
 * `dropcode upload`: one request for what fits in a chunk, else a chunked session with
 * `--parallel` chunks in flight of `--chunk-size` bytes (by default what the service suggests in
 * /limits: on its filesystem storage one chunk of 64 MiB at a time, on S3 4 parts at once).
 * Every byte is covered by a digest the service checks: the file's `sha256` (on /upload after
 * the file part; at /upload/complete for a session) and each chunk's `chunk_sha256` (after the
 * chunk's bytes).
 *
 * One read of the input: a fresh session declares `chunk_size` (the embedded store writes each
 * chunk in place and completion copies nothing), reads the chunks in index order, and hashes
 * them in a worker (hasher.ts) while they are sent, each on its own and into the whole file's
 * digest, which goes with /upload/complete. A directory's tar is counted before that from its
 * entries' metadata (tar.ts tarSize: total_chunks is declared at start), not generated; should
 * the tar then stream another size (the tree changed), it is measured and sent once more.
 *
 * Resuming: a session's id is kept in a state file (state.ts) named by the server URL, the
 * input's absolute path, its size and mtime (a directory: its path; the saved tar size must
 * match) and the chunk size; a rerun hashes the input first (each chunk's SHA-256, the one pass
 * that precedes sending, and only when resuming), asks /upload/verify and sends only the chunks
 * that are missing or whose SHA-256 differs. Standard input cannot be read twice, so it is one
 * streaming /upload, not resumable and not retried once its bytes started to flow.
 */
import { createHash } from 'node:crypto'
import { Readable, Transform } from 'node:stream'
import type { LimitsAnswer, StartAnswer, UploadAnswer, VerifyAnswer } from '../api/answers.js'
import { MiB, type UploadArgs } from './args.js'
import { CliError, EXIT, InputChanged } from './exit-codes.js'
import { Hasher, sharedBuffer } from './hasher.js'
import { describe, type Client } from './http.js'
import { Multipart } from './multipart.js'
import { progress as makeProgress, type Progress } from './progress.js'
import { digest, measure, openSource, readChunks, type Digests, type Source } from './source.js'
import { StateFile, stateWarning } from './state.js'
import { tarSize } from './tar.js'

/** The most chunks in flight a service's hint can ask for (and the sockets kept for them). */
export const MAX_SUGGESTED_PARALLEL = 8
/** Bytes per chunk when neither --chunk-size nor the service says; a file up to it is one request. */
const DEFAULT_CHUNK_SIZE = 8 * MiB
/** The chunk sizes a service's hint can ask for: the CLI holds one chunk more than it has in flight. */
const SUGGESTED_CHUNK_SIZE = { min: MiB, max: 64 * MiB }

/** A chunked upload's settings once the service's hints are in. */
type SizedArgs = UploadArgs & { chunkSize: number }

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
  /** The input's SHA-256 when it was known at start (a resumed session's; older CLIs: always). */
  sha256?: string | undefined
  size: number
  chunkSize: number
  maxDownloads: number | undefined
  expiryHours: number | undefined
}

/** The service's upload answer; this version of it always has the size and SHA-256. */
type Answer = Required<UploadAnswer>

/** Progress is counted per slice of a chunk handed to the socket, so the bar moves smoothly. */
const SLICE = 1024 * 1024

export async function upload (args: UploadArgs, client: Client): Promise<UploadResult> {
  const source = await openSource(args.path, args.name)
  // GET /limits, asked at most once and only for what the options leave open.
  let hints: Promise<Hints> | undefined
  const hinted = () => (hints ??= serviceHints(client))
  let answer: Answer
  if (source.kind === 'stdin' || (source.kind === 'file' && source.size! <= (args.chunkSize ?? DEFAULT_CHUNK_SIZE))) {
    answer = await single(args, client, source, source.size, undefined)
  } else {
    const sized = { ...args, chunkSize: args.chunkSize ?? (await hinted()).chunkSize }
    const parallel = async () => args.parallel ?? (await hinted()).parallel
    const state = uploadState(sized, client, source)
    const saved = await state.read()
    // Only a resume needs the chunks' digests before sending (to compare them with verify's).
    const known = saved !== undefined ? await digest(source, sized.chunkSize, true) : undefined
    const send = async (size: number, resumable: UploadState | undefined) => size <= sized.chunkSize
      ? await single(args, client, source, size, known?.sha256)
      : await chunked(sized, client, source, state, resumable, size, known, parallel)
    const exact = known?.size ?? source.size
    try {
      answer = await send(exact ?? await counted(source), saved)
    } catch (err) {
      // A directory's tar came out another size than counted (the tree changed meanwhile): its
      // bytes are measured and sent once more, in a new session.
      if (!(err instanceof InputChanged) || exact !== undefined) throw err
      await state.remove()
      if (!args.quiet) process.stderr.write(`dropcode: ${err.message}; sending it again\n`)
      answer = await send(await measure(source), undefined)
    }
  }
  const expiryHours = args.expiryHours ?? 24
  return { code: answer.code, size: answer.size, sha256: answer.sha256, name: source.name, expiry_hours: expiryHours, expires_at: new Date(Date.now() + expiryHours * 3_600_000).toISOString() }
}

/** A directory's tar size, counted from its entries' metadata (tar.ts): no pass over its bytes. */
async function counted (source: Source): Promise<number> {
  try {
    return await tarSize(source.path)
  } catch (err) {
    throw new CliError(EXIT.LOCAL, `cannot read ${source.path}: ${describe(err)}`)
  }
}

/** POST /upload, the input streamed with its SHA-256 sent after it (or before, when known). */
async function single (args: UploadArgs, client: Client, source: Source, size: number | undefined, known: string | undefined): Promise<Answer> {
  const progress = makeProgress('upload', size, args)
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
  if (known !== undefined) form.field('sha256', known)
  form.file('file', source.name, { length: size, open })
  let actual = known ?? ''
  if (known === undefined) form.lateField('sha256', 64, () => { actual = hash.digest('hex'); return actual })
  const stdin = source.kind === 'stdin'
  const answer = await client.json<Answer>('upload', 'POST', '/upload', form, { retry: !stdin, digestRetry: !stdin })
  progress.done()
  if (answer.sha256 !== actual) throw new CliError(EXIT.INTEGRITY, `the service stored SHA-256 ${answer.sha256}, ${actual} was sent`)
  return answer
}

/**
 * What makes a rerun "the same upload": server, input path, a file's size and mtime, the chunk
 * size. (A directory's tar size is known only after a pass over it; the saved state's size is
 * compared with it before the session is reused.)
 */
function stateIdentity (client: Client, source: Source, chunkSize: number): unknown[] {
  return [client.base.href, source.kind, source.path, source.kind === 'file' ? source.size : 'dir', source.kind === 'file' ? source.mtimeMs : 0, chunkSize]
}

/** Bound to the key: another key's session is never resumed (nor its file found). */
const uploadState = (args: SizedArgs, client: Client, source: Source) =>
  new StateFile<UploadState>('upload', stateIdentity(client, source, args.chunkSize), { key: args.key, warn: stateWarning(args) })

/**
 * A chunked session: `known` (the input's digests, from the pass a resume makes) lets a saved
 * session be continued; without it a new session starts and the chunks are hashed as they go.
 */
async function chunked (args: SizedArgs, client: Client, source: Source, state: StateFile<UploadState>, saved: UploadState | undefined, size: number, known: Digests | undefined, hint: () => Promise<number>): Promise<Answer> {
  const total = Math.ceil(size / args.chunkSize)
  const wanted = { size, chunkSize: args.chunkSize, maxDownloads: args.maxDownloads, expiryHours: args.expiryHours }
  const progress = makeProgress('upload', size, args)
  let parallel: Promise<number> | undefined

  let uploadId: string | undefined
  let missing: number[] = []
  const same = saved !== undefined && known !== undefined && saved.size === size && saved.chunkSize === args.chunkSize &&
    saved.maxDownloads === args.maxDownloads && saved.expiryHours === args.expiryHours && (saved.sha256 === undefined || saved.sha256 === known.sha256)
  if (same) {
    const resumed = await resume(client, saved.uploadId, known.chunks ?? [])
    if (resumed !== undefined && 'code' in resumed) {
      await state.remove()
      return checked(resumed, known.sha256)
    }
    if (resumed !== undefined) {
      uploadId = saved.uploadId
      missing = resumed.missing
      progress.note(`resuming upload: ${total - missing.length} of ${total} chunks already sent`)
      progress.skip(size - missing.reduce((n, i) => n + Math.min(args.chunkSize, size - i * args.chunkSize), 0))
    }
  }
  if (uploadId === undefined) {
    // Asked beside the session's start (when the chunk size did not need it before).
    parallel = hint()
    const form = new Multipart().field('filename', source.name).field('total_chunks', total).field('chunk_size', args.chunkSize)
      .field('max_downloads', args.maxDownloads).field('expiry_hours', args.expiryHours).field('sha256', known?.sha256)
    uploadId = (await client.json<StartAnswer>('upload start', 'POST', '/upload/start', form)).upload_id
    await state.write({ uploadId, ...wanted, ...(known !== undefined ? { sha256: known.sha256 } : {}) })
    missing = Array.from({ length: total }, (_, i) => i)
  }

  const sha256 = await sendChunks(args, client, source, size, known, uploadId, missing, await (parallel ?? hint()), progress)
  // sha256 at complete: checked before anything is published (a service that predates it
  // ignores it; the answer's sha256 is compared below either way).
  const form = new Multipart().field('upload_id', uploadId).field('sha256', sha256)
  try {
    const answer = await client.json<Answer>('upload complete', 'POST', '/upload/complete', form)
    progress.done()
    await state.remove()
    return checked(answer, sha256)
  } catch (err) {
    // A digest mismatch closes the session; a vanished session cannot be completed either.
    if (err instanceof CliError && (err.exitCode === EXIT.INTEGRITY || err.exitCode === EXIT.NOT_FOUND)) await state.remove()
    throw err
  }
}

function checked (answer: Answer, sha256: string): Answer {
  if (answer.sha256 !== sha256) throw new CliError(EXIT.INTEGRITY, `the service stored SHA-256 ${answer.sha256}, the input has ${sha256}`)
  return answer
}

/**
 * What is left of a saved session: the chunks to send (missing, or stored with another
 * SHA-256), or its answer if it was completed already (the complete's answer was lost or the CLI
 * died before printing it: verify answers `completed` with the code; a service that predates
 * that answers 404, and then a repeated complete answers the same code), or undefined when it
 * is gone.
 */
async function resume (client: Client, uploadId: string, chunks: string[]): Promise<{ missing: number[] } | Answer | undefined> {
  const form = new Multipart().field('upload_id', uploadId)
  try {
    const v = await client.json<VerifyAnswer>('upload verify', 'POST', '/upload/verify', form)
    if (v.completed === true && v.code !== undefined) return { code: v.code, size: v.size!, sha256: v.sha256! }
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

/**
 * Sends `missing` with at most `parallel` requests at once, the next chunk read meanwhile (one
 * chunk buffer more than requests: with one in flight, the file's read is off the path); resolves with
 * the input's SHA-256: `known`'s, or (every chunk sent, in order) hashed as they were read.
 */
async function sendChunks (args: SizedArgs, client: Client, source: Source, size: number, known: Digests | undefined, uploadId: string, missing: number[], parallel: number, progress: Progress): Promise<string> {
  const hasher = known === undefined ? new Hasher() : undefined
  const running = new Set<Promise<void>>()
  let failure: unknown
  // Cuts the requests in flight when the input cannot be read on (or changed): their session is
  // given up, and a request left behind would be retried while the next one runs.
  const abandon = new AbortController()
  // Chunk buffers are reused once their request and their hash are done: a fresh 8 MiB buffer per
  // chunk cost a page fault per 4 KiB (a third of the CLI's system time in a 1 GiB upload).
  const free: Buffer[] = []
  const alloc = (length: number) => (free.pop() ?? (hasher !== undefined ? sharedBuffer(args.chunkSize) : Buffer.allocUnsafeSlow(args.chunkSize))).subarray(0, length)
  const reuse = (data: Buffer) => { free.push(Buffer.from(data.buffer, data.byteOffset, args.chunkSize)) }
  try {
    for await (const { index, data } of readChunks(source, args.chunkSize, size, missing, alloc)) {
      // This chunk was read while the ones in flight went out; now it waits for a slot.
      if (running.size >= parallel) await Promise.race(running)
      if (failure !== undefined) break
      const form = new Multipart().field('upload_id', uploadId).field('chunk_index', index)
      const sha = known?.chunks?.[index]
      if (sha !== undefined) form.field('chunk_sha256', sha)
      form.file('chunk', source.name, metered(data, progress))
      let hashed: Promise<string> | undefined
      if (sha === undefined) {
        hashed = hasher?.chunk(data) ?? Promise.resolve(createHash('sha256').update(data).digest('hex'))
        hashed.catch(() => {}) // awaited when the field is sent
        form.lateField('chunk_sha256', 64, () => hashed!)
      }
      const sent = client.json(`chunk ${index}`, 'POST', '/upload/chunk', form, { digestRetry: true, signal: abandon.signal })
      const p: Promise<void> = sent
        .then(() => {}, (err: unknown) => { failure ??= err })
        .finally(() => running.delete(p))
      // The worker may still read the buffer after a request failed early.
      Promise.allSettled([sent, hashed]).then(() => reuse(data), () => {})
      running.add(p)
    }
    await Promise.all(running)
    if (failure !== undefined) throw failure
    return known?.sha256 ?? await hasher!.finish()
  } catch (err) {
    abandon.abort(err)
    await Promise.allSettled(running)
    throw err
  } finally {
    hasher?.close()
  }
}

interface Hints { parallel: number, chunkSize: number }

/**
 * What GET /limits suggests for the options not given: chunks in flight (`chunks_in_flight`, 1
 * on the service's filesystem storage, where only a chunk that arrives right after the ones
 * before it is hashed as it streams; 4 on S3; at most MAX_SUGGESTED_PARALLEL) and bytes per
 * chunk (`chunk_size`, 64 MiB on its filesystem storage, where each chunk costs a few ms besides
 * its bytes; its part size on S3; within SUGGESTED_CHUNK_SIZE and max_chunk_size). A service
 * that does not say (or a proxy's answer, or any failure: the hint is not worth a retry): 4 in
 * flight, 8 MiB.
 */
async function serviceHints (client: Client): Promise<Hints> {
  // Partial: an older service answers fewer fields, each one is checked before it is used.
  let limits: Partial<Record<keyof LimitsAnswer, unknown>> = {}
  try {
    limits = await client.json('limits', 'GET', '/limits', undefined, { retry: false })
  } catch { /* the defaults */ }
  const count = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : undefined
  const chunkSize = Math.max(SUGGESTED_CHUNK_SIZE.min, Math.min(count(limits.chunk_size) ?? DEFAULT_CHUNK_SIZE, SUGGESTED_CHUNK_SIZE.max))
  return {
    parallel: Math.min(count(limits.chunks_in_flight) ?? 4, MAX_SUGGESTED_PARALLEL),
    chunkSize: Math.min(chunkSize, count(limits.max_chunk_size) ?? Infinity)
  }
}

/** A chunk as a request body that counts its bytes into the progress as they go out. */
function metered (data: Buffer, progress: Progress): { length: number, open: () => Readable } {
  let sent = 0
  async function * slices () {
    for (let at = 0; at < data.length; at += SLICE) {
      const slice = data.subarray(at, at + SLICE)
      sent += slice.length
      progress.add(slice.length)
      yield slice
    }
  }
  return {
    length: data.length,
    open: () => {
      progress.add(-sent) // a retry sends it again
      sent = 0
      return Readable.from(slices())
    }
  }
}
