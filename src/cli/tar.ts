/**
 * Directories travel as tar streams, through node-tar (npm `tar`, by isaacs, the archiver npm
 * itself uses): it streams both ways (no temporary copy), writes POSIX ustar/pax that every
 * `tar` reads, and its extraction already strips leading `/`, refuses `..` and never writes
 * through a symlink. On top of that we refuse (and report) every entry that would leave the
 * target: absolute or `..` paths, and links (symbolic or hard) whose target lies outside it.
 */
import path from 'node:path'
import { Readable, Writable } from 'node:stream'
import { create, extract, type ReadEntry } from 'tar'
import { CliError, EXIT } from './exit-codes.js'

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

const outside = (p: string) => p === '..' || p.startsWith('../') || path.isAbsolute(p)

/** Why an entry would leave `target`, or undefined when it stays inside. */
export function unsafeEntry (entryPath: string, type: string, linkpath: string | undefined): string | undefined {
  const normal = path.posix.normalize(entryPath.replace(/\\/g, '/'))
  if (path.posix.isAbsolute(entryPath) || /^[A-Za-z]:/.test(entryPath)) return 'absolute path'
  if (entryPath.split(/[/\\]/).includes('..') || outside(normal)) return '".." in path'
  if (type === 'SymbolicLink' && linkpath !== undefined) {
    if (path.posix.isAbsolute(linkpath)) return `absolute link target ${linkpath}`
    if (outside(path.posix.normalize(path.posix.join(path.posix.dirname(normal), linkpath)))) return `link target ${linkpath} outside the directory`
  }
  if (type === 'Link' && linkpath !== undefined && (path.posix.isAbsolute(linkpath) || outside(path.posix.normalize(linkpath)))) {
    return `hard link target ${linkpath} outside the directory`
  }
  return undefined
}

/** A writable that unpacks a tar into `target` and fails, after the whole stream, on unsafe entries. */
export function safeExtract (target: string, overwrite: boolean): Writable & { unsafe: string[] } {
  const unsafe: string[] = []
  const unpack = extract({
    cwd: target,
    preserveOwner: false,
    keep: !overwrite, // an existing file stays unless --force
    filter: (p, entry) => {
      const e = entry as ReadEntry
      const why = unsafeEntry(e.path ?? p, e.type, e.linkpath)
      if (why !== undefined) unsafe.push(`${e.path ?? p}: ${why}`)
      return why === undefined
    }
  })
  return Object.assign(unpack as unknown as Writable, { unsafe })
}

export async function extractFile (source: Readable, target: string, overwrite: boolean): Promise<void> {
  const sink = safeExtract(target, overwrite)
  await new Promise<void>((resolve, reject) => {
    source.on('error', reject)
    sink.on('error', (err: Error) => reject(new CliError(EXIT.LOCAL, `cannot extract the archive: ${err.message}`)))
    sink.on('close', resolve)
    source.pipe(sink)
  })
  if (sink.unsafe.length > 0) {
    throw new CliError(EXIT.LOCAL, `unsafe archive: refused ${sink.unsafe.length} entr${sink.unsafe.length === 1 ? 'y' : 'ies'} (${sink.unsafe.slice(0, 3).join('; ')})`)
  }
}
