/**
 * Where a symbolic link really leads inside a tree. A target that stays inside *as text*
 * (`s/../../etc` normalizes to `etc`) can still leave on disk when `s` is itself a link, so the
 * target is walked the way the kernel walks it: every component that is a link (`linkAt` says
 * so) is replaced by that link's target, and a `..` that would climb above the tree's root means
 * the link leads out. One walk serves three checks: the archive's entries as they arrive (a model
 * of the tree built so far), the extracted tree on disk before it is moved into place, and a
 * directory before it is uploaded.
 */
import fs from 'node:fs'
import path from 'node:path'

/** The target of the link at `relative` (a `/`-separated path from the root), or undefined when that is no link. */
export type LinkAt = (relative: string) => string | undefined

/** Linux's MAXSYMLINKS: a longer chain is a loop, or meant to wear the walk out. */
const MAX_HOPS = 40

/**
 * Undefined when the link at `link` (relative to the root) with `target` stays inside the root
 * once every link it passes through is followed; else why it does not.
 */
export function linkLeaves (link: string, target: string, linkAt: LinkAt): string | undefined {
  if (target.startsWith('/')) return `absolute link target ${target}`
  const stack = link.split('/').filter(c => c !== '' && c !== '.')
  stack.pop() // a relative target starts from the link's directory
  const pending = target.split('/')
  const via: string[] = []
  const out = () => `link target ${target} leads outside the directory${via.length > 0 ? ` (through the link${via.length > 1 ? 's' : ''} ${via.join(', ')})` : ''}`
  while (pending.length > 0) {
    const part = pending.shift()!
    if (part === '' || part === '.') continue
    if (part === '..') {
      if (stack.pop() === undefined) return out()
      continue
    }
    stack.push(part)
    const next = linkAt(stack.join('/'))
    if (next === undefined) continue
    via.push(stack.join('/'))
    if (via.length > MAX_HOPS) return `link target ${target}: more than ${MAX_HOPS} links to follow (a loop?)`
    if (next.startsWith('/')) return out()
    stack.pop()
    pending.unshift(...next.split('/'))
  }
  return undefined
}

/** What is on disk under `root`: a link's target, never following one. */
export function diskLinks (root: string): LinkAt {
  return relative => {
    const p = path.join(root, relative)
    try {
      return fs.lstatSync(p).isSymbolicLink() ? fs.readlinkSync(p) : undefined
    } catch {
      return undefined // missing (a dangling link's target) or not a directory: nothing to follow
    }
  }
}
