/**
 * What an upload reads: a regular file (random access: any chunk can be read on its own), a
 * directory as a tar stream (sequential only: it is regenerated for each pass, identically,
 * see tar.ts), or standard input (one pass, length unknown).
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { cleanFilename } from '../core/filename.js'
import { CliError, EXIT, InputChanged } from './exit-codes.js'
import { describe } from './http.js'
import { packDirectory } from './tar.js'
import { auditTree } from './tree-audit.js'

export interface Source {
  kind: 'file' | 'directory' | 'stdin'
  /** Absolute path ('' for stdin). */
  path: string
  /** Filename sent to the service. */
  name: string
  /** Bytes; undefined for stdin. For a directory: the tar's size, known after `digest`. */
  size: number | undefined
  /** File: its mtime (ms), part of what makes a rerun "the same upload". */
  mtimeMs: number
  /** A fresh stream of the whole input. */
  open (): Readable
}

export async function openSource (input: string, name: string | undefined): Promise<Source> {
  if (input === '-') return { kind: 'stdin', path: '', name: cleanFilename(name ?? 'stdin'), size: undefined, mtimeMs: 0, open: () => process.stdin }
  const abs = path.resolve(input)
  let stat
  try {
    stat = await fs.stat(abs)
  } catch (err) {
    throw new CliError(EXIT.LOCAL, `cannot read ${input}: ${describe(err)}`)
  }
  if (stat.isDirectory()) {
    await refuseLinksOut(abs)
    return { kind: 'directory', path: abs, name: cleanFilename(name ?? `${path.basename(abs)}.tar`), size: undefined, mtimeMs: stat.mtimeMs, open: () => packDirectory(abs) }
  }
  if (!stat.isFile()) throw new CliError(EXIT.LOCAL, `${input} is neither a file nor a directory`)
  // Large reads: the hashing pass is bound by the number of calls as much as by the bytes.
  return { kind: 'file', path: abs, name: cleanFilename(name ?? path.basename(abs)), size: stat.size, mtimeMs: stat.mtimeMs, open: () => createReadStream(abs, { highWaterMark: 1024 * 1024 }) }
}

/**
 * A directory with a link that leads out of it (absolute, or `..` above it, also through other
 * links), or a FIFO or device, is refused before a byte is sent: on the receiving side the link
 * would point at whatever lies there, and `download --extract` refuses such an archive anyway.
 * Whoever means to send one can make the tar themselves and upload it as a file.
 */
async function refuseLinksOut (dir: string): Promise<void> {
  const problems = await auditTree(dir, { hardlinks: false, label: path.basename(dir) }).catch((err: unknown) => {
    throw new CliError(EXIT.LOCAL, `cannot read ${dir}: ${describe(err)}`)
  })
  if (problems.length === 0) return
  const shown = problems.slice(0, 20).map(p => `\n  ${p}`).join('') + (problems.length > 20 ? `\n  (and ${problems.length - 20} more)` : '')
  throw new CliError(EXIT.LOCAL, `refusing to upload ${dir}: ${problems.length} entr${problems.length === 1 ? 'y leads' : 'ies lead'} out of it or cannot travel in a tar:${shown}\n(to send it anyway: tar -cf x.tar -C ${path.dirname(dir)} ${path.basename(dir)} && dropcode upload x.tar)`)
}

/** The input's bytes; a read failure (an unreadable file inside a directory) is a local error. */
async function * readable (source: Source): AsyncGenerator<Buffer> {
  try {
    yield * source.open() as AsyncIterable<Buffer>
  } catch (err) {
    throw err instanceof CliError ? err : new CliError(EXIT.LOCAL, `cannot read ${source.path || 'the input'}: ${describe(err)}`)
  }
}

export interface Digests {
  size: number
  /** SHA-256 of the whole input, hex. */
  sha256: string
  /** SHA-256 of each chunk, hex (only when asked for: resuming compares them with verify's). */
  chunks: string[] | undefined
}

/** A pass over a directory's tar for its size alone (total_chunks): nothing hashed. */
export async function measure (source: Source): Promise<number> {
  let size = 0
  for await (const data of readable(source)) size += data.length
  return size
}

/** One pass over the input: its size, its SHA-256 and (withChunks) each chunk's, in constant memory. */
export async function digest (source: Source, chunkSize: number, withChunks: boolean): Promise<Digests> {
  const whole = createHash('sha256')
  const chunks: string[] = []
  let part = createHash('sha256')
  let inPart = 0
  let size = 0
  for await (const data of readable(source)) {
    whole.update(data)
    size += data.length
    if (!withChunks) continue
    let at = 0
    while (at < data.length) {
      const take = Math.min(chunkSize - inPart, data.length - at)
      part.update(data.subarray(at, at + take))
      inPart += take
      at += take
      if (inPart === chunkSize) {
        chunks.push(part.digest('hex'))
        part = createHash('sha256')
        inPart = 0
      }
    }
  }
  if (inPart > 0 || size === 0) chunks.push(part.digest('hex'))
  return { size, sha256: whole.digest('hex'), chunks: withChunks ? chunks : undefined }
}

/**
 * The chunks in `wanted` (ascending), each as one buffer: read at their offsets from a file,
 * or cut from one sequential pass over a directory's tar. The consumer pulls one at a time, so
 * memory is bounded by the chunks it holds.
 */
export async function * readChunks (source: Source, chunkSize: number, size: number, wanted: number[], alloc: (length: number) => Buffer = n => Buffer.allocUnsafe(n)): AsyncGenerator<{ index: number, data: Buffer }> {
  const lengthOf = (i: number) => Math.min(chunkSize, size - i * chunkSize)
  if (source.kind === 'file') {
    const fh = await fs.open(source.path)
    try {
      for (const index of wanted) {
        const data = alloc(lengthOf(index))
        let got = 0
        while (got < data.length) {
          const { bytesRead } = await fh.read(data, got, data.length - got, index * chunkSize + got)
          if (bytesRead === 0) throw new CliError(EXIT.LOCAL, `${source.path} got shorter while it was uploaded`)
          got += bytesRead
        }
        yield { index, data }
      }
    } finally {
      await fh.close()
    }
    return
  }
  const want = new Set(wanted)
  let index = 0
  let length = lengthOf(0)
  let buf = want.has(0) ? alloc(length) : undefined
  let fill = 0
  for await (const data of readable(source)) {
    let at = 0
    while (at < data.length) {
      if (index * chunkSize >= size) throw new InputChanged(`${source.path} changed while it was uploaded (the tar grew)`)
      const take = Math.min(length - fill, data.length - at)
      if (buf !== undefined) data.copy(buf, fill, at, at + take)
      fill += take
      at += take
      if (fill === length) {
        if (buf !== undefined) yield { index, data: buf }
        index++
        length = index * chunkSize < size ? lengthOf(index) : 0
        buf = want.has(index) ? alloc(length) : undefined
        fill = 0
      }
    }
  }
  if (index * chunkSize < size) throw new InputChanged(`${source.path} changed while it was uploaded (the tar shrank)`)
}
