/**
 * Directories travel as tar streams, through node-tar (npm `tar`, by isaacs, the archiver npm
 * itself uses): it streams both ways (no temporary copy) and writes POSIX ustar/pax that every
 * `tar` reads. Extraction, and what it refuses, is unpack.ts and extract.ts.
 */
import path from 'node:path'
import { Readable } from 'node:stream'
import { create } from 'tar'

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
