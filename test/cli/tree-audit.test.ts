/**
 * The on-disk check run before an extracted tree is moved into place (and before a directory is
 * uploaded). Its link walk is driven through the real CLI in extract-safety.test.ts; hard links
 * with names outside the tree cannot be made through an archive any more (the entry checks and
 * node-tar refuse them first), so that guard is checked here on a tree made by hand.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { auditTree } from '../../src/cli/tree-audit.js'
import { dataDir } from '../helpers/tmp.js'

t.test('a hard link whose other name is outside the tree is reported; hard links inside are fine', async t => {
  const base = dataDir(t)
  const tree = path.join(base, 'tree')
  fs.mkdirSync(path.join(tree, 'sub'), { recursive: true })
  fs.writeFileSync(path.join(base, 'secret.txt'), 'outside')
  fs.linkSync(path.join(base, 'secret.txt'), path.join(tree, 'sub', 'copy.txt'))
  fs.writeFileSync(path.join(tree, 'a.txt'), 'inside')
  fs.linkSync(path.join(tree, 'a.txt'), path.join(tree, 'sub', 'b.txt'))
  t.same(await auditTree(tree, { hardlinks: true }), ['sub/copy.txt: hard link to a file outside the directory (1 of its 2 names are elsewhere)'])
  t.same(await auditTree(tree, { hardlinks: false }), [], 'a source tree may share files with the rest of the disk')
})

t.test('links are followed through other links on disk, never above the root', async t => {
  const tree = dataDir(t)
  fs.mkdirSync(path.join(tree, 'a', 'b'), { recursive: true })
  fs.symlinkSync('../..', path.join(tree, 'a', 'b', 'up')) // the root: fine
  fs.symlinkSync('a/b/up/a/b/up/a', path.join(tree, 'round')) // through it twice: still inside
  fs.symlinkSync('a/b/up/..', path.join(tree, 'out'))
  fs.symlinkSync('loop2', path.join(tree, 'loop1'))
  fs.symlinkSync('loop1/x', path.join(tree, 'loop2'))
  const problems = await auditTree(tree, { hardlinks: true })
  t.same(problems.sort(), [
    'loop1: link target loop2: more than 40 links to follow (a loop?)',
    'loop2: link target loop1/x: more than 40 links to follow (a loop?)',
    'out: link target a/b/up/.. leads outside the directory (through the link a/b/up)'
  ])
})
