/**
 * Unpacking a tar (node-tar, gzip detected by itself) into a fresh, empty staging directory;
 * extract.ts checks the result on disk and moves it into place. Here every entry is checked as
 * it arrives, against a model of the links accepted so far, and refused when:
 * - its path is absolute or has a `..` component, or it lies under a link of the archive;
 * - it is a symbolic link whose target leads outside once the archive's links on the way are
 *   followed (links.ts), or a hard link through a link, to a link, or out;
 * - it is a device, a FIFO or of a type node-tar does not know;
 * - it goes over the bounds: entries, or bytes of content (summed from the headers, so nothing
 *   is written beyond the bound; node-tar also aborts a gzip stream that inflates over 1000×).
 * Whatever node-tar itself skips or warns about (writing through a link, a hard link to nothing)
 * is reported too: an entry is extracted as the archive says, or the extraction fails. After the
 * first refusal nothing more is written (the staging directory is discarded), but the entries
 * are still read, to name every refused one.
 */
import path from 'node:path'
import type { Readable } from 'node:stream'
import { extract, type ReadEntry } from 'tar'
import { CliError, EXIT } from './exit-codes.js'
import { linkLeaves } from './links.js'

export interface UnpackLimits {
  /** Entries of any kind (files, directories, links) at most. */
  maxEntries: number
  /** Bytes of file content at most, as the entries' headers declare them. */
  maxBytes: number
}

const FILES = new Set(['File', 'OldFile', 'ContiguousFile'])
const DIRS = new Set(['Directory', 'GNUDumpDir'])

/** `a//b/./c/` → `a/b/c`; the root itself is `.`. */
const normal = (p: string) => path.posix.normalize(p).replace(/\/+$/, '') || '.'

/** The first of `p`'s proper prefixes (or `p` itself, with `self`) that is a link of the model. */
function linkOnPath (p: string, links: Map<string, string>, self: boolean): string | undefined {
  const parts = p === '.' ? [] : p.split('/')
  for (let i = 1; i <= parts.length - (self ? 0 : 1); i++) {
    const prefix = parts.slice(0, i).join('/')
    if (links.has(prefix)) return prefix
  }
  return undefined
}

/** Why an entry may not be extracted, given the links accepted before it; undefined when it may. */
export function entryProblem (e: Pick<ReadEntry, 'path' | 'type' | 'linkpath'>, links: Map<string, string>): string | undefined {
  if (e.path.startsWith('/') || /^[A-Za-z]:/.test(e.path)) return 'absolute path'
  if (e.path.split('/').includes('..')) return '".." in path'
  const p = normal(e.path)
  if (p === '.' && !DIRS.has(e.type)) return `a ${e.type} in place of the directory itself`
  const under = linkOnPath(p, links, false)
  if (under !== undefined) return `under the link ${under}: it would be written through it`
  if (FILES.has(e.type) || DIRS.has(e.type)) return undefined
  const target = e.linkpath ?? ''
  if (e.type === 'SymbolicLink') return target === '' ? 'a link without a target' : linkLeaves(p, target, rel => links.get(rel))
  if (e.type === 'Link') {
    if (target === '' || target.startsWith('/') || target.split('/').includes('..')) return `hard link to ${target === '' ? 'nothing' : target}, outside the directory`
    const link = linkOnPath(normal(target), links, true)
    if (link === normal(target)) return `hard link to the link ${link} (a copy of a link elsewhere points elsewhere)`
    if (link !== undefined) return `hard link through the link ${link}`
    return undefined
  }
  return `${e.type} entries are not extracted`
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

/** Unpacks `source` into the empty directory `dir`; resolves with the refused entries (`path: why`). */
export async function unpack (source: Readable, dir: string, limits: UnpackLimits): Promise<string[]> {
  const refused: string[] = []
  const links = new Map<string, string>()
  const seen = new WeakSet<object>()
  let entries = 0
  let bytes = 0
  let overLimit: string | undefined
  const sink = extract({
    cwd: dir,
    // Each write unpacks what it holds at once (node-tar's UnpackSync): creating 3,000 small
    // files took 2.3 s with every file operation a round trip through libuv's threads, one entry
    // at a time, 1.6 s this way (GNU tar: 0.7 s, most of it the kernel creating the files).
    sync: true,
    preserveOwner: false, // never apply the archive's owners, even as root
    filter: (_p, entry) => {
      const e = entry as ReadEntry
      seen.add(e)
      if (overLimit !== undefined) return false
      entries++
      if (FILES.has(e.type)) bytes += e.size ?? 0
      if (entries > limits.maxEntries) overLimit = `more than ${plural(limits.maxEntries, 'entry', 'entries')} (raise the bound with --max-entries)`
      else if (bytes > limits.maxBytes) overLimit = `more than ${limits.maxBytes} bytes once extracted, at ${e.path} (raise the bound with --max-size)`
      if (overLimit !== undefined) {
        // Stop reading at once: the rest may be a bomb. The staging directory is discarded.
        queueMicrotask(() => { source.destroy(); sink.abort(new Error(overLimit)) })
        return false
      }
      const why = entryProblem(e, links)
      if (why !== undefined) refused.push(`${e.path}: ${why}`)
      // Refused links stay in the model too, so that what lies under them is named as well.
      if (e.type === 'SymbolicLink') links.set(normal(e.path), e.linkpath ?? '')
      else if (why === undefined) links.delete(normal(e.path))
      return refused.length === 0
    },
    onwarn: (_code, message, data) => {
      const entry = (data as { entry?: ReadEntry }).entry
      refused.push(`${entry?.path ?? 'the archive'}: ${message}`)
    }
  })
  // Entries that never reach the filter: types node-tar does not know, oversized metadata.
  sink.on('ignoredEntry', (e: ReadEntry) => { if (!seen.has(e)) refused.push(`${e.path}: ${e.type} entries are not extracted`) })
  await new Promise<void>((resolve, reject) => {
    source.on('error', err => reject(overLimit !== undefined ? new CliError(EXIT.LOCAL, `archive refused: ${overLimit}`) : err))
    sink.on('error', (err: Error) => reject(new CliError(EXIT.LOCAL, overLimit !== undefined ? `archive refused: ${overLimit}` : `cannot extract the archive: ${err.message}`)))
    sink.on('close', resolve)
    source.pipe(sink)
  })
  return refused
}
