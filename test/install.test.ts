/**
 * `npm ci` is quiet and the same on every npm (issue 24): the three dependencies with install
 * scripts are denied them in package.json's allowScripts (npm 11.16+ skips or warns about
 * scripts it has no decision for), because each works from its prebuilt platform package. This
 * checks that they do, as installed by `npm ci` with their scripts skipped.
 */
import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { root } from './helpers/server-process.js'
import { dataDir } from './helpers/tmp.js'

const require = createRequire(import.meta.url)

t.test('every install script is decided, and each denied package works from its prebuilt binary', async t => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean> }
  t.same(pkg.allowScripts, { esbuild: false, lmdb: false, 'msgpackr-extract': false })

  const { open } = await import('lmdb')
  const db = open({ path: path.join(dataDir(t), 'db') })
  await db.put('k', { v: 1 })
  t.same(db.get('k'), { v: 1 }, 'lmdb: its native addon from @lmdb/lmdb-<platform>')
  await db.close()
  t.equal((require('msgpackr') as { isNativeAccelerationEnabled: boolean }).isNativeAccelerationEnabled, true, 'msgpackr-extract: from @msgpackr-extract/msgpackr-extract-<platform>')
  const { transform } = await import('esbuild')
  t.equal((await transform('let a: number = 1', { loader: 'ts' })).code, 'let a = 1;\n', 'esbuild: its binary from @esbuild/<platform>')
})
