/**
 * Directories travel as tar streams, through node-tar (npm `tar`, by isaacs, the archiver npm
 * itself uses): it streams both ways (no temporary copy) and writes POSIX ustar/pax that every
 * `tar` reads. Extraction, and what it refuses, is unpack.ts and extract.ts.
 */
import type { Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { create, Header, Pax } from 'tar'

/**
 * Readdir results, sorted: the same directory always gives the same bytes, so a directory can
 * be hashed in one pass and sent in another (and resumed by a later run).
 */
class SortedReaddir extends Map<string, string[]> {
  override set (key: string, entries: string[]): this {
    return super.set(key, [...entries].sort())
  }
}

/**
 * A tar of `dir`, entries named `<basename>/…` (like `tar -C parent -c basename`). `portable`
 * leaves out owners, atime and ctime, so only the files' names, modes, mtimes and bytes count;
 * `strict` makes an unreadable file an error instead of a warning and a missing entry.
 */
export function packDirectory (dir: string): Readable {
  const abs = path.resolve(dir)
  const pack = create({ cwd: path.dirname(abs), portable: true, strict: true, readdirCache: new SortedReaddir() }, [path.basename(abs)])
  return Readable.from(pack as AsyncIterable<Buffer>)
}

/**
 * The byte count of packDirectory(dir), from lstat, readdir and readlink alone (no file's bytes
 * are read: a third of the time of packing a tree of small files, and none of its reads of the
 * large ones): each entry's header block through node-tar's own Header (with a Pax block when
 * that header needs one, as node-tar decides), its data padded to 512 bytes, and the two zero
 * blocks at the end; the entries as node-tar writes them with packDirectory's options (portable:
 * no mtime on directories; a file seen before through another hard link is a Link entry without
 * data; sockets and devices are left out). The stream stays what counts: whoever relies on this
 * count must compare it with the stream's (the tree may change in between).
 */
export async function tarSize (dir: string): Promise<number> {
  const abs = path.resolve(dir)
  const cwd = path.dirname(abs)
  const seen = new Map<string, string>()
  let total = 1024
  async function add (entryPath: string, stat: Stats): Promise<void> {
    const absolute = path.resolve(cwd, entryPath)
    let p = entryPath
    let type: 'File' | 'Directory' | 'SymbolicLink' | 'Link'
    let size = 0
    let linkpath: string | undefined
    let mtime: Date | undefined = stat.mtime
    if (stat.isDirectory()) {
      type = 'Directory'
      if (!p.endsWith('/')) p += '/'
      mtime = undefined
    } else if (stat.isSymbolicLink()) {
      type = 'SymbolicLink'
      linkpath = await fs.readlink(absolute)
    } else if (stat.isFile()) {
      type = 'File'
      size = stat.size
      if (stat.nlink > 1) {
        const key = `${stat.dev}:${stat.ino}`
        const first = seen.get(key)
        if (first?.indexOf(cwd) === 0) {
          type = 'Link'
          linkpath = path.relative(cwd, first)
          size = 0
        } else seen.set(key, absolute)
      }
    } else return
    const header = new Header({ path: p, linkpath, mode: stat.mode & 0o7777, size, mtime, type })
    if (header.encode()) total += new Pax({ mtime, path: p, linkpath, size }).encode().length
    total += 512 + Math.ceil(size / 512) * 512
    if (type === 'Directory') {
      // Stated together, counted in order (the first of several hard links is the one with data).
      const names = (await fs.readdir(absolute)).sort()
      const stats = await Promise.all(names.map(name => fs.lstat(path.join(absolute, name))))
      for (const [i, name] of names.entries()) await add(p + name, stats[i]!)
    }
  }
  await add(path.basename(abs), await fs.lstat(abs))
  return total
}
