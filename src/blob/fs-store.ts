/**
 * Filesystem BlobStore: the embedded default, under DATA_DIR/blobs.
 *
 * Layout: `{root}/{key[0..2]}/{key}`; the two-character fan-out keeps directories small.
 * A put writes `{key}.part` and renames it into place when the body has ended, so a reader
 * never sees half a file and a crash leaves only a `.part` file, which `purge` removes.
 * Chunked uploads whose chunk size was declared (`chunk_size` at /upload/start) write each chunk
 * in place, at offset index × chunk size of one file, `{key}.chunks/whole` (a retry overwrites
 * its own range; the service caps a chunk at the declared size, so no chunk can write into
 * another's): completion truncates that file to the chunks' total and renames it into place,
 * copying nothing. Other sessions write each chunk to `{key}.chunks/{index}-{nonce}` (a retry
 * writes a new file and the replaced one is discarded); completion concatenates them in index
 * order into `{key}.part`, renames it into place and removes the chunk directory.
 * Appendable (tus) uploads use the same in-place file: `beginChunked(key, { append: true })`
 * creates it, each append writes its body at its offset (the receipt is `{ size, at: offset }`,
 * so completion and `readChunk` are the in-place ones). A body that fails midway still ends the
 * write normally (append-body.ts): every byte it delivered is flushed and kept, and the client
 * resumes after them. An append that is not recorded (it failed, or the service discarded it)
 * leaves bytes past the recorded total that the next append overwrites, or completion's
 * truncation drops; `previous` needs nothing from the file, so it stays valid.
 * A tus concatenation (`concatenate`) copies nothing: its sources' files (whole objects) are
 * hard-linked in order into a directory `{key}.joining/` as `0`, `1`, …, which is renamed to
 * `{key}.joined/` once whole. The sources stay (a final that dies midway is retried from them);
 * `get` of such a key opens every part at once and streams them in order (a range across
 * parts too), `delete` removes the directory. The service hashes it by reading it back, from
 * the page cache where the partials were just written.
 * Deleting a file that a download is still reading is safe: POSIX keeps the data until the
 * reader closes it.
 */
import { once } from 'node:events'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { randomBytes } from 'node:crypto'
import type { ByteRange } from '../core/byte-range.js'
import { DropcodeError, isOutOfSpace, StartupError } from '../core/errors.js'
import { isBlobKey } from '../core/ids.js'
import { ByteCounter, Sha256Meter } from '../core/streams.js'
import { AppendBody } from './append-body.js'
import { BlobNotFoundError, type BlobStore } from './blob-store.js'

/** A filesystem failure: 507 when the disk (or quota) is full, else 503. */
const unavailable = (err: unknown) => new DropcodeError(isOutOfSpace(err) ? 'DROPCODE_STORAGE_FULL' : 'DROPCODE_STORAGE_UNAVAILABLE', undefined, undefined, { cause: err })

export function createFsBlobStore ({ dir }: { dir: string }): BlobStore {
  const root = path.resolve(dir)
  const pathOf = (key: string) => {
    if (!isBlobKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return path.join(root, key.slice(0, 2), key)
  }

  /**
   * Writes `body` to a file: `temp`, then renamed to `final` (on failure `temp` is removed), or
   * `at` byte `offset` of an existing file (`inPlace`: nothing to rename or remove). Rejects
   * with the body's own error when the body failed first, with a storage error when the disk
   * did (a full disk must not be blamed on the client).
   */
  async function write (to: { temp: string, final: string } | { inPlace: string, offset: number }, body: Readable, counter: ByteCounter | Sha256Meter = new ByteCounter()): Promise<number> {
    let bodyError: unknown
    let diskError: unknown
    body.once('error', err => { bodyError ??= err })
    let out: fs.WriteStream | undefined
    try {
      if ('temp' in to) await fsp.mkdir(path.dirname(to.final), { recursive: true })
      out = 'temp' in to ? fs.createWriteStream(to.temp, { flags: 'wx' }) : fs.createWriteStream(to.inPlace, { flags: 'r+', start: to.offset })
      out.once('error', err => { if (err !== bodyError) diskError ??= err })
      await pipeline(body, counter, out)
      if ('temp' in to) await fsp.rename(to.temp, to.final)
      return counter.bytes
    } catch (err) {
      // A stream destroyed before its open() finished still creates the file afterwards:
      // wait for it to close, or the removal below could come first and leave the file.
      if (out !== undefined && !out.closed) await once(out, 'close').catch(() => {})
      if ('temp' in to) await fsp.rm(to.temp, { force: true }).catch(() => {})
      if (diskError !== undefined || isOutOfSpace(err)) throw unavailable(diskError ?? err)
      throw bodyError ?? unavailable(err)
    }
  }
  const chunkDir = (key: string) => `${pathOf(key)}.chunks`

  /**
   * Streams `files` (a session's chunks) in order into the object `key`, hashing them, then
   * removes its chunk directory.
   */
  async function concatenateFiles (key: string, files: string[]): Promise<{ size: number, sha256: string }> {
    async function * concatenated () {
      for (const file of files) yield * fs.createReadStream(file)
    }
    const final = pathOf(key)
    const meter = new Sha256Meter()
    // A completer killed midway left its temporary file; the one taking over (its completion
    // lease is its alone) starts it afresh.
    await fsp.rm(`${final}.part`, { force: true }).catch(() => {})
    const size = await write({ temp: `${final}.part`, final }, Readable.from(concatenated()), meter)
    await fsp.rm(chunkDir(key), { recursive: true, force: true }).catch(() => {})
    return { size, sha256: meter.hex() }
  }
  /** The file an in-place session's chunks are written into (see the top). */
  const wholeOf = (key: string) => path.join(chunkDir(key), 'whole')
  /** A concatenated object's parts, in order (see the top). */
  const joinedDir = (key: string) => `${pathOf(key)}.joined`

  /** `get` of a concatenated object: every part opened at once (a delete meanwhile takes nothing from the reader). */
  async function getJoined (key: string, range: ByteRange | undefined, readSize: number | undefined): Promise<{ body: Readable, size: number }> {
    const dir = joinedDir(key)
    let names: string[]
    try {
      names = await fsp.readdir(dir)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(key)
      throw unavailable(err)
    }
    const parts: Array<{ handle: fsp.FileHandle, size: number }> = []
    const closeAll = async () => { await Promise.all(parts.map(async p => await p.handle.close().catch(() => {}))) }
    try {
      for (const name of names.map(Number).sort((a, b) => a - b)) {
        const handle = await fsp.open(path.join(dir, String(name)), 'r')
        parts.push({ handle, size: 0 })
        parts.at(-1)!.size = (await handle.stat()).size
      }
    } catch (err) {
      await closeAll()
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(key)
      throw unavailable(err)
    }
    const size = parts.reduce((n, p) => n + p.size, 0)
    const { start, end } = range ?? { start: 0, end: size - 1 }
    async function * bytes () {
      try {
        let at = 0
        for (const { handle, size } of parts) {
          const from = Math.max(start, at)
          const to = Math.min(end, at + size - 1)
          if (from <= to) yield * handle.createReadStream({ start: from - at, end: to - at, autoClose: false, ...(readSize !== undefined ? { highWaterMark: readSize } : {}) })
          at += size
        }
      } finally {
        await closeAll()
      }
    }
    return { body: Readable.from(bytes(), { objectMode: false }), size }
  }

  return {
    async put (key, body) {
      const final = pathOf(key)
      return { size: await write({ temp: `${final}.part`, final }, body) }
    },

    async beginChunked (key, options) {
      try {
        await fsp.mkdir(chunkDir(key), { recursive: true })
        if (options?.chunkSize !== undefined || options?.append === true) await (await fsp.open(wholeOf(key), 'a')).close()
      } catch (err) {
        throw unavailable(err)
      }
      return ''
    },

    async putChunk (key, _handle, chunk) {
      if (chunk.chunkSize !== undefined) {
        const at = chunk.index * chunk.chunkSize
        return { size: await write({ inPlace: wholeOf(key), offset: at }, chunk.body), at }
      }
      const name = `${chunk.index}-${randomBytes(6).toString('hex')}`
      const file = path.join(chunkDir(key), name)
      return { size: await write({ temp: `${file}.part`, final: file }, chunk.body), file: name }
    },

    async appendChunk (key, _handle, input) {
      const body = new AppendBody(input.body, input.observe)
      try {
        const size = await write({ inPlace: wholeOf(key), offset: input.offset }, Readable.from(body))
        return { receipt: { size, at: input.offset }, cut: body.cut }
      } catch (err) {
        input.body.destroy()
        throw err
      }
    },

    async concatenate (key, _handle, sources) {
      const joined = joinedDir(key)
      const joining = `${pathOf(key)}.joining`
      let size = 0
      try {
        // A completer killed midway left its directory; the one taking over starts it afresh.
        await fsp.rm(joining, { recursive: true, force: true })
        await fsp.mkdir(joining, { recursive: true })
        for (const [i, source] of sources.entries()) {
          const part = path.join(joining, String(i))
          await fsp.link(pathOf(source.key), part)
          size += (await fsp.stat(part)).size
        }
        await fsp.rm(joined, { recursive: true, force: true })
        await fsp.rename(joining, joined)
      } catch (err) {
        await fsp.rm(joining, { recursive: true, force: true }).catch(() => {})
        throw unavailable(err)
      }
      await fsp.rm(chunkDir(key), { recursive: true, force: true }).catch(() => {})
      return { size }
    },

    async discardChunk (key, _handle, receipt) {
      if (receipt.at !== undefined) return // in place: a retry overwrote its range, or will
      await fsp.rm(path.join(chunkDir(key), String(receipt.file)), { force: true }).catch(err => { throw unavailable(err) })
    },

    readChunk (key, _handle, receipt) {
      const { size } = receipt
      if (receipt.at === undefined) return fs.createReadStream(path.join(chunkDir(key), String(receipt.file)))
      const at = receipt.at as number
      return size === 0 ? Readable.from([]) : fs.createReadStream(wholeOf(key), { start: at, end: at + size - 1 })
    },

    async completeChunked (key, _handle, receipts) {
      const dir = chunkDir(key)
      if (receipts.length > 0 && receipts.every(r => r.at !== undefined)) {
        // In place: a retried last chunk may have left longer bytes past the total.
        const size = receipts.reduce((n, r) => n + r.size, 0)
        try {
          await fsp.truncate(wholeOf(key), size)
          await fsp.rename(wholeOf(key), pathOf(key))
        } catch (err) {
          throw unavailable(err)
        }
        await fsp.rm(dir, { recursive: true, force: true }).catch(() => {})
        return { size }
      }
      return await concatenateFiles(key, receipts.map(r => path.join(dir, String(r.file))))
    },

    async get (key, range, options) {
      const file = pathOf(key)
      let handle: fsp.FileHandle
      try {
        handle = await fsp.open(file, 'r')
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return await getJoined(key, range, options?.readSize)
        throw unavailable(err)
      }
      try {
        const { size } = await handle.stat()
        return { body: handle.createReadStream({ ...range, ...(options?.readSize !== undefined ? { highWaterMark: options.readSize } : {}) }), size }
      } catch (err) {
        await handle.close()
        throw unavailable(err)
      }
    },

    async delete (key) {
      const file = pathOf(key)
      try {
        await fsp.rm(file, { force: true })
        await fsp.rm(joinedDir(key), { recursive: true, force: true })
      } catch (err) {
        throw unavailable(err)
      }
    },

    async purge (key) {
      await this.delete(key)
      await fsp.rm(`${pathOf(key)}.part`, { force: true }).catch(err => { throw unavailable(err) })
      await fsp.rm(`${pathOf(key)}.joining`, { recursive: true, force: true }).catch(err => { throw unavailable(err) })
      await fsp.rm(chunkDir(key), { recursive: true, force: true }).catch(err => { throw unavailable(err) })
    },

    async init () {
      try {
        await fsp.mkdir(root, { recursive: true })
        await fsp.access(root, fs.constants.W_OK)
      } catch (err) {
        throw new StartupError(`cannot write files under ${root} (DATA_DIR): ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
          'make DATA_DIR writable by this user, or point DATA_DIR elsewhere', { cause: err })
      }
    },

    async ping () {
      try {
        await fsp.access(root, fs.constants.W_OK)
      } catch (err) {
        throw unavailable(err)
      }
    }
  }
}
