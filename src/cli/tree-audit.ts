/**
 * A walk over a tree on disk (never following a link) listing what would let a later step
 * leave it: links whose target leads outside once every link on the way is followed (links.ts),
 * hard links whose other names are outside, and FIFOs, sockets and devices. Run on a directory
 * before it is uploaded and on an extracted archive before it is moved into place: what is on
 * disk is what `cp -rL`, `rsync -L` or a web server will follow, whatever order the archive's
 * entries came in.
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import { diskLinks, linkLeaves } from './links.js'

export interface AuditOptions {
  /**
   * Count each multiply-linked file's names inside the tree and report a file with names outside
   * it (an extracted tree: every name in it came from the archive). A source tree may share files
   * with the rest of the disk; its hard links travel as copies.
   */
  hardlinks: boolean
  /** Prefix for the reported paths (e.g. the uploaded directory's name). */
  label?: string
}

/** Problems as `path: why`, in walk order; empty when the tree is safe to follow. */
export async function auditTree (root: string, { hardlinks, label = '' }: AuditOptions): Promise<string[]> {
  const problems: string[] = []
  const linkAt = diskLinks(root)
  const names = new Map<string, { path: string, nlink: number, seen: number }>()
  const dirs = ['']
  while (dirs.length > 0) {
    const dir = dirs.pop()!
    for (const entry of await fs.readdir(path.join(root, dir), { withFileTypes: true })) {
      const rel = dir === '' ? entry.name : `${dir}/${entry.name}`
      const shown = label === '' ? rel : `${label}/${rel}`
      if (entry.isDirectory()) {
        dirs.push(rel)
      } else if (entry.isSymbolicLink()) {
        const why = linkLeaves(rel, await fs.readlink(path.join(root, rel)), linkAt)
        if (why !== undefined) problems.push(`${shown}: ${why}`)
      } else if (entry.isFile()) {
        if (!hardlinks) continue
        const st = await fs.lstat(path.join(root, rel))
        if (st.nlink < 2) continue
        const id = `${st.dev}:${st.ino}`
        const known = names.get(id) ?? { path: shown, nlink: st.nlink, seen: 0 }
        known.seen++
        names.set(id, known)
      } else {
        problems.push(`${shown}: ${entry.isFIFO() ? 'a FIFO' : entry.isSocket() ? 'a socket' : 'a device'}, not a file, directory or link`)
      }
    }
  }
  for (const { path: p, nlink, seen } of names.values()) {
    if (seen < nlink) problems.push(`${p}: hard link to a file outside the directory (${nlink - seen} of its ${nlink} names are elsewhere)`)
  }
  return problems
}
