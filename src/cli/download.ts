/**
 * `dropcode download`.
 *
 * A download first asks HEAD (which counts nothing) for the name, so an existing file is
 * refused before a download is used up. The GET's bytes are hashed as they are written and
 * compared with its `Repr-Digest`; a mismatch removes the partial file. The bytes go to
 * `NAME.dropcode-part` beside the target and are renamed into place once verified. What
 * arrives while a write is under way is written next in one `writev` (see copy): one awaited
 * 64 KiB write per socket read left the socket unread half of the time.
 *
 * Resuming: the service keeps a cut download resumable for DOWNLOAD_RESUME_SECONDS for whoever
 * holds its claim's ETag (a secret sent only with the GET). Within one run, a cut connection is
 * resumed at once (`Range: bytes=N-` + `If-Range: ETag`); across runs (the CLI was killed), the
 * ETag is kept in a state file (state.ts) until the download ends, and a rerun continues the
 * partial file. If the service answers 200 instead of 206 (the window passed), it has counted a
 * new download and the file starts over.
 *
 * `--extract` unpacks the archive while it arrives (extract.ts), into a staging directory that
 * is moved into place once the digest is verified: the download and the unpacking overlap, as in
 * `curl | tar x`. The archive is written to its partial file all the same, for a later run to
 * resume: that run unpacks the partial file's bytes first.
 */
import { createHash, type Hash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import fs from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
import path from 'node:path'
import { NO_ANSWER } from '../api/retry.js'
import { cleanFilename } from '../core/filename.js'
import { DEFAULT_MAX_SIZE, type DownloadArgs } from './args.js'
import { CliError, EXIT } from './exit-codes.js'
import { describe, Retryable, type Client } from './http.js'
import { checkCode, failed, hexDigest, info, type FileInfo } from './lookup.js'
import { progress as makeProgress } from './progress.js'
import { StateFile, stateWarning } from './state.js'
import { besideTarget, cannotWrite, startExtraction, targetExists, type Extraction } from './extract.js'

interface DownloadState { etag: string, sha256: string, size: number, file: FileInfo }

/** A failing local write or open: exit 8 with the path, never a retry. */
const exists = (p: string) => fs.stat(p).then(() => true, () => false)

export interface DownloadResult extends FileInfo { path: string }

export async function download (args: DownloadArgs, client: Client): Promise<DownloadResult> {
  checkCode(args.code)
  const toStdout = args.output === '-' && !args.extract
  // Named by what the command asked for, not by the file's name: a rerun finds it without
  // asking HEAD, which answers 404 once the last permitted download is claimed (and resumable).
  const state = new StateFile<DownloadState>('download', [client.base.href, args.code, path.resolve(args.output ?? '.'), args.extract], { warn: stateWarning(args) })
  let saved = toStdout ? undefined : await state.read()
  // The name becomes a path: only a base name, as from the service, is taken from a state file.
  if (saved !== undefined && cleanFilename(saved.file?.name) !== saved.file?.name) saved = undefined
  const head = saved?.file ?? await info(args, client)
  let target = '-'
  let part = '-'
  let made: string | undefined // the first directory this run created for the archive, if any
  let targetIsDir = false
  if (args.extract) {
    target = path.resolve(args.output ?? '.')
    targetIsDir = await targetExists(target)
    // An archive made by `dropcode upload DIR` (DIR.tar) holds DIR/: if DIR is there already,
    // the extraction would be refused at its end (exit 8), after the download was spent. Say so
    // before a byte is claimed. (Other archives are checked entry by entry at the end.)
    const top = head.name.endsWith('.tar') ? head.name.slice(0, -4) : ''
    if (saved === undefined && targetIsDir && !args.force && top !== '' && await exists(path.join(target, top))) {
      throw new CliError(EXIT.LOCAL, `${target} already has ${top}: --extract never writes into an existing tree; pass --force to replace it with the archive's, or extract elsewhere with -o (nothing was downloaded)`)
    }
    part = besideTarget(target, targetIsDir, head.name, '.dropcode-part')
    made = await fs.mkdir(path.dirname(part), { recursive: true }).catch(cannotWrite(path.dirname(part)))
  } else if (!toStdout) {
    target = args.output !== undefined ? path.resolve(args.output) : path.resolve(head.name)
    if (args.output !== undefined && (await fs.stat(target).catch(() => undefined))?.isDirectory() === true) target = path.join(target, head.name)
    part = `${target}.dropcode-part`
  }
  if (saved === undefined && !toStdout && !args.extract && !args.force && await exists(target)) {
    throw new CliError(EXIT.LOCAL, `${target} exists: pass --force to overwrite it, or -o another path`)
  }

  // An uncompressed tar never holds more than its own size: the size bound is for compression.
  const tee = args.extract
    ? await startExtraction(target, targetIsDir, head.name, { maxEntries: args.maxEntries, maxBytes: args.maxSize ?? Math.max(DEFAULT_MAX_SIZE, saved?.size ?? head.size) }, args.force)
    : undefined
  const { sha256, size } = await fetchInto(args, client, head, part, saved, state, tee).catch(async (err: unknown) => {
    await tee?.discard()
    if (made !== undefined && !(err instanceof CliError && err.exitCode === EXIT.NETWORK)) await removeEmpty(path.dirname(part), made)
    throw err
  })
  if (!toStdout) {
    if (tee !== undefined) {
      try {
        await tee.finish()
      } catch (err) {
        await fs.rm(part, { force: true })
        if (made !== undefined) await removeEmpty(path.dirname(part), made) // a failed extraction leaves nothing
        throw err
      } finally {
        await fs.rm(part, { force: true }) // verified and unpacked (or refused): the download is over
        await state.remove()
      }
    } else {
      await fs.rename(part, target).catch(cannotWrite(target))
    }
    await state.remove()
  }
  return { ...head, size, sha256, path: target }
}

/**
 * GETs the file into `part` (or stdout), and every byte in order to `tee`, resuming cut
 * connections; verifies the digest. Resolves with the verified SHA-256 and size.
 */
async function fetchInto (args: DownloadArgs, client: Client, head: FileInfo, part: string, saved: DownloadState | undefined, state: StateFile<DownloadState>, tee: Extraction | undefined) {
  const transfer = await Transfer.open(args, client, head, part, saved, state, tee)
  try {
    while (!transfer.over()) await transfer.receive(await transfer.request())
  } catch (err) {
    // A network failure keeps the partial file and its state, for a rerun to resume.
    if (err instanceof CliError && err.exitCode !== EXIT.NETWORK) await transfer.fail(err)
    await transfer.close()
    throw err
  }
  return await transfer.verify()
}

/** One download's progress through its GETs: its claim, what arrived, and where it goes. */
class Transfer {
  /** The claim's ETag, once a GET claimed the download (or from a saved state). */
  private etag: string | undefined
  /** The SHA-256 the service declared (empty: none), and the file's size. */
  private expected: string
  private size: number
  private hash = createHash('sha256')
  /** Bytes written so far (and hashed, and passed to the extraction). */
  private offset = 0
  /** GETs in a row that added no byte. */
  private stalls = 0
  private readonly toStdout: boolean
  private readonly progress: ReturnType<typeof makeProgress>
  private fh: fs.FileHandle | undefined

  private constructor (private readonly args: DownloadArgs, private readonly client: Client, private readonly head: FileInfo, private readonly part: string,
    saved: DownloadState | undefined, private readonly state: StateFile<DownloadState>, private readonly tee: Extraction | undefined) {
    this.toStdout = part === '-'
    this.etag = saved?.etag
    this.expected = saved?.sha256 ?? head.sha256
    this.size = saved?.size ?? head.size
    this.progress = makeProgress('download', this.size, args)
  }

  /** Starts a download, or continues the partial file of a saved one (its bytes hashed and unpacked again). */
  static async open (args: DownloadArgs, client: Client, head: FileInfo, part: string, saved: DownloadState | undefined, state: StateFile<DownloadState>, tee: Extraction | undefined): Promise<Transfer> {
    const t = new Transfer(args, client, head, part, saved, state, tee)
    if (saved !== undefined) {
      const offset = (await fs.stat(part).catch(() => undefined))?.size ?? 0
      t.offset = offset > t.size ? 0 : offset
      t.hash = await hashPrefix(part, t.offset, tee)
    }
    t.fh = t.toStdout ? undefined : await fs.open(part, t.offset > 0 ? 'r+' : 'w').catch(cannotWrite(part))
    if (t.offset > 0) {
      t.progress.note(`resuming download at ${t.offset} of ${t.size} bytes`)
      t.progress.skip(t.offset)
    }
    return t
  }

  over (): boolean {
    return this.offset >= this.size && this.etag !== undefined
  }

  /**
   * The next GET, with its retries: with a claim, always the rest of it (even from 0: a partial
   * file lost after a kill still resumes the claim rather than counting a new download).
   */
  async request (): Promise<IncomingMessage> {
    const res = await this.client.retrying('download', async () => {
      const claim = this.etag
      const r = await this.client.exchange('GET', `/download/${this.args.code}`, claim !== undefined ? { range: `bytes=${this.offset}-`, 'if-range': claim } : {})
      if (r.statusCode === 206 && claim !== undefined) {
        const start = /^bytes (\d+)-/.exec(r.headers['content-range'] ?? '')?.[1]
        if (Number(start) !== this.offset) { r.destroy(); throw new Retryable(`resumed at ${String(start)}, not ${this.offset}`, NO_ANSWER) }
        return r
      }
      if (r.statusCode === 200) return r
      return await failed(r, this.args.code, this.client.url(`/download/${this.args.code}`))
    })
    if (res.statusCode === 200) await this.claimed(res)
    return res
  }

  /** A 200: a new claim, the whole file from its first byte (an earlier claim's window passed). */
  private async claimed (res: IncomingMessage): Promise<void> {
    if (this.etag !== undefined) {
      this.progress.note('the service could not resume the download (its window passed): starting again (this counted a new download)')
      this.progress.add(-this.offset)
      await this.tee?.restart() // bytes of the earlier claim were unpacked
    }
    this.offset = 0
    this.hash = createHash('sha256')
    await this.fh?.truncate(0)
    this.etag = String(res.headers.etag ?? '')
    this.expected = hexDigest(res.headers['repr-digest'])
    this.size = Number(res.headers['content-length'])
    if (!this.toStdout) await this.state.write({ etag: this.etag, sha256: this.expected, size: this.size, file: this.head })
  }

  /** Writes what the answer brings; a cut is noted (and resumed by the next request) until it keeps adding nothing. */
  async receive (res: IncomingMessage): Promise<void> {
    const before = this.offset
    const pos = { offset: this.offset }
    let cut: unknown
    try {
      await copy(res, this.fh, pos, this.hash, this.tee, n => this.progress.add(n))
    } catch (err) {
      if (err instanceof CliError) throw err
      cut = err
    }
    this.offset = pos.offset // every byte counted here was written
    if (this.offset >= this.size) return
    this.stalls = this.offset > before ? 0 : this.stalls + 1
    if (this.stalls > this.args.retries) throw new CliError(EXIT.NETWORK, `download: cut at ${this.offset} of ${this.size} bytes again and again`)
    this.progress.note(`download cut at ${this.offset} of ${this.size} bytes${cut !== undefined ? ` (${describe(cut)})` : ''}; resuming`)
  }

  /** Checks the size and the digest; a mismatch removes the partial file and its state. */
  async verify (): Promise<{ sha256: string, size: number }> {
    await this.close()
    this.progress.done()
    const actual = this.hash.digest('hex')
    const { offset, size, expected } = this
    if (offset !== size) await this.fail(new CliError(EXIT.INTEGRITY, `received ${offset} bytes, ${size} expected`))
    if (expected !== '' && actual !== expected) {
      await this.fail(new CliError(EXIT.INTEGRITY, `integrity check failed: SHA-256 ${actual}, the service declared ${expected}${this.toStdout ? '' : '; the partial file was removed'}`))
    }
    if (expected === '') this.progress.note('warning: the service sent no Repr-Digest; the download is not verified')
    return { sha256: actual, size }
  }

  async close (): Promise<void> {
    const { fh } = this
    this.fh = undefined
    await fh?.close()
  }

  /** Gives the download up for good: the partial file and its state go. */
  async fail (err: CliError): Promise<never> {
    await this.close()
    if (!this.toStdout) {
      await fs.rm(this.part, { force: true })
      await this.state.remove()
    }
    throw err
  }
}

/** Bytes gathered at most into one write. */
const BATCH = 4 * 1024 * 1024
/** Writes in flight at most (then the socket waits). */
const IN_FLIGHT = 4

/**
 * Writes the body at `pos.offset` (or to stdout), hashing it as it arrives; `pos` advances only
 * over bytes written, so after a cut it is where a resume starts (and the hash has seen exactly
 * those bytes: every received byte is written before this returns). The socket's own buffers
 * are written as they are (no copy): what came while a write was under way goes in the next
 * `writev`, so writes are small while the disk keeps up (a partial file grows as bytes come)
 * and large when it does not.
 */
async function copy (res: IncomingMessage, fh: fs.FileHandle | undefined, pos: { offset: number }, hash: Hash, tee: Extraction | undefined, onBytes: (n: number) => void): Promise<void> {
  let queued = pos.offset
  let pending: Buffer[] = []
  let pendingBytes = 0
  let tail: Promise<void> = Promise.resolve()
  const inFlight: Array<Promise<void>> = []
  let busy = 0
  let soon = false
  const flush = (): void => {
    if (pendingBytes === 0) return
    const buffers = pending
    const at = queued
    const length = pendingBytes
    queued += length
    pending = []
    pendingBytes = 0
    busy++
    const written = fh !== undefined ? writeAt(fh, buffers, at) : toStdout(buffers)
    tail = Promise.all([tail, written]).then(() => { pos.offset = at + length }).finally(() => {
      busy--
      if (busy === 0) flush() // what came meanwhile (the socket may have gone quiet)
    })
    tail.catch(() => {}) // a failed write fails every later one too: the one awaited reports it
    inFlight.push(tail)
  }
  /** Waits until at most `most` writes are under way (they settle in order). */
  const settle = async (most: number) => {
    for (let next = inFlight.shift(); next !== undefined; next = inFlight.shift()) {
      if (inFlight.length < most) { inFlight.unshift(next); return }
      await next
    }
  }
  try {
    for await (const data of res as AsyncIterable<Buffer>) {
      hash.update(data)
      const unpacking = tee?.write(data)
      pending.push(data)
      pendingBytes += data.length
      onBytes(data.length)
      if (pendingBytes >= BATCH) flush()
      else if (!soon) {
        // Once this turn's socket reads are in: one write for all of them.
        soon = true
        setImmediate(() => { soon = false; if (busy === 0) flush() })
      }
      if (inFlight.length > busy) inFlight.splice(0, inFlight.length - busy) // settled ones
      if (unpacking !== undefined) await unpacking // the unpacking is behind: the socket waits
      await settle(IN_FLIGHT - 1)
    }
  } finally {
    // What arrived is written before a cut is reported: the resume starts after it.
    flush()
    await settle(0)
    await tail
  }
  if (!res.complete) throw new Error('connection closed')
}

async function writeAt (fh: fs.FileHandle, buffers: Buffer[], at: number): Promise<void> {
  let rest = buffers
  while (rest.length > 0) {
    let { bytesWritten } = await fh.writev(rest, at).catch(cannotWrite('the download')) // not a cut: no resume
    at += bytesWritten
    // A short write (rare, for a regular file): go on from where it stopped.
    while (rest.length > 0 && bytesWritten >= rest[0]!.length) bytesWritten -= rest.shift()!.length
    if (bytesWritten > 0) rest = [rest[0]!.subarray(bytesWritten), ...rest.slice(1)]
  }
}

async function toStdout (buffers: Buffer[]): Promise<void> {
  let ok = true
  for (const b of buffers) ok = process.stdout.write(b)
  if (!ok) await new Promise(resolve => process.stdout.once('drain', resolve))
}

/** Removes `dir` and its parents up to `top` (which this run created), as long as they are empty. */
async function removeEmpty (dir: string, top: string): Promise<void> {
  for (let d = dir; d.startsWith(top); d = path.dirname(d)) {
    if (!await fs.rmdir(d).then(() => true, () => false)) return
  }
}

/** SHA-256 state of the first `length` bytes of a partial file (also given to `tee`). */
async function hashPrefix (file: string, length: number, tee: Extraction | undefined): Promise<Hash> {
  const hash = createHash('sha256')
  if (length === 0) return hash
  for await (const data of createReadStream(file, { start: 0, end: length - 1 }) as AsyncIterable<Buffer>) {
    hash.update(data)
    await tee?.write(data)
  }
  return hash
}
