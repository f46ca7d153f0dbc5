/**
 * Filesystem BlobStore: the embedded default, under DATA_DIR/blobs.
 *
 * Layout: `{root}/{key[0..2]}/{key}`; the two-character fan-out keeps directories small.
 * A put writes `{key}.part` and renames it into place when the body has ended, so a reader
 * never sees half a file and a crash leaves only a `.part` file, which `purge` removes.
 * Chunked uploads write each chunk to `{key}.chunks/{index}-{nonce}` (a retry writes a new
 * file and the replaced one is discarded); completion concatenates them in index order into
 * `{key}.part`, renames it into place and removes the chunk directory.
 * Deleting a file that a download is still reading is safe: POSIX keeps the data until the
 * reader closes it.
 */
import { once } from 'node:events'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { DropcodeError } from '../errors.js'
import { randomBytes } from 'node:crypto'
import { isBlobKey } from '../ids.js'
import { BlobNotFoundError, type BlobStore } from './blob-store.js'
import { ByteCounter } from './byte-counter.js'

const unavailable = (err: unknown) => new DropcodeError('DROPCODE_STORAGE_UNAVAILABLE', undefined, undefined, { cause: err })

export function createFsBlobStore ({ dir }: { dir: string }): BlobStore {
  const root = path.resolve(dir)
  const pathOf = (key: string) => {
    if (!isBlobKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return path.join(root, key.slice(0, 2), key)
  }

  /** Writes `body` to `temp`, then renames it to `final`; on failure removes `temp`. */
  async function writeFile (temp: string, final: string, body: Readable): Promise<number> {
    const counter = new ByteCounter()
    let bodyError: unknown
    body.once('error', err => { bodyError = err })
    let out: fs.WriteStream | undefined
    try {
      await fsp.mkdir(path.dirname(final), { recursive: true })
      out = fs.createWriteStream(temp, { flags: 'wx' })
      await pipeline(body, counter, out)
      await fsp.rename(temp, final)
      return counter.bytes
    } catch (err) {
      // A stream destroyed before its open() finished still creates the file afterwards:
      // wait for it to close, or the removal below could come first and leave the file.
      if (out !== undefined && !out.closed) await once(out, 'close').catch(() => {})
      await fsp.rm(temp, { force: true }).catch(() => {})
      throw bodyError ?? unavailable(err)
    }
  }
  const chunkDir = (key: string) => `${pathOf(key)}.chunks`

  return {
    async put (key, body) {
      const final = pathOf(key)
      return { size: await writeFile(`${final}.part`, final, body) }
    },

    async beginChunked (key) {
      await fsp.mkdir(chunkDir(key), { recursive: true }).catch(err => { throw unavailable(err) })
      return ''
    },

    async putChunk (key, _handle, chunk) {
      const name = `${chunk.index}-${randomBytes(6).toString('hex')}`
      const file = path.join(chunkDir(key), name)
      return { size: await writeFile(`${file}.part`, file, chunk.body), file: name }
    },

    async discardChunk (key, _handle, receipt) {
      await fsp.rm(path.join(chunkDir(key), String(receipt.file)), { force: true }).catch(err => { throw unavailable(err) })
    },

    async completeChunked (key, _handle, receipts) {
      const dir = chunkDir(key)
      async function * concatenated () {
        for (const r of receipts) yield * fs.createReadStream(path.join(dir, String(r.file)))
      }
      const final = pathOf(key)
      const size = await writeFile(`${final}.part`, final, Readable.from(concatenated()))
      await fsp.rm(dir, { recursive: true, force: true }).catch(() => {})
      return { size }
    },

    async get (key) {
      const file = pathOf(key)
      let handle: fsp.FileHandle
      try {
        handle = await fsp.open(file, 'r')
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(key)
        throw unavailable(err)
      }
      try {
        const { size } = await handle.stat()
        return { body: handle.createReadStream(), size }
      } catch (err) {
        await handle.close()
        throw unavailable(err)
      }
    },

    async delete (key) {
      const file = pathOf(key)
      try {
        await fsp.rm(file, { force: true })
      } catch (err) {
        throw unavailable(err)
      }
    },

    async purge (key) {
      await this.delete(key)
      await fsp.rm(`${pathOf(key)}.part`, { force: true }).catch(err => { throw unavailable(err) })
      await fsp.rm(chunkDir(key), { recursive: true, force: true }).catch(err => { throw unavailable(err) })
    },

    async init () {
      await fsp.mkdir(root, { recursive: true })
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
