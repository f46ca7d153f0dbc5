/**
 * Issue 19, "archives cannot link out": hostile tars built entry by entry (hostile-tar.ts),
 * uploaded as files and unpacked by the real CLI with `download --extract`. Each is refused with
 * exit 8 naming the entries, and afterwards nothing exists on disk: no target, no staging
 * directory, no partial file, nothing beside or above the target, no resume state.
 */
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { dir, file, gzipBomb, hardlink, symlink, tarBytes, type TarEntry } from './hostile-tar.js'
import { type CliEnv, cliEnv, runCli, stateFiles } from './run.js'

const MiB = 1024 * 1024
const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))

/** Uploads `bytes` as a file; resolves with its code. */
async function uploadArchive (t: Test, env: CliEnv, name: string, bytes: Buffer, downloads = 1): Promise<string> {
  fs.writeFileSync(path.join(env.cwd, name), bytes)
  const up = await runCli(t, ['upload', name, '-q', '--max-downloads', String(downloads)], env)
  t.equal(up.status, 0, up.stderr)
  return up.stdout.trim()
}

/** Every path under `root` with its content (files) or target (links), never following a link. */
function snapshot (root: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of fs.readdirSync(path.join(root, rel)).sort()) {
    const r = rel === '' ? name : `${rel}/${name}`
    const st = fs.lstatSync(path.join(root, r))
    if (st.isDirectory()) Object.assign(out, { [r]: 'dir' }, snapshot(root, r))
    else out[r] = st.isSymbolicLink() ? `-> ${fs.readlinkSync(path.join(root, r))}` : fs.readFileSync(path.join(root, r), 'utf8')
  }
  return out
}

/**
 * `download CODE --extract -o place/out` of a hostile archive: exit 8, the stderr lines match,
 * and `place` (an empty directory of its own) is still empty afterwards.
 */
async function refusedInto (t: Test, env: CliEnv, code: string, messages: RegExp[], extra: string[] = []) {
  const place = fs.mkdtempSync(path.join(env.cwd, 'place-'))
  const down = await runCli(t, ['download', code, '--extract', '-o', path.join(place, 'out'), ...extra], env)
  t.equal(down.status, 8, down.stderr)
  for (const m of messages) t.match(down.stderr, m)
  t.same(fs.readdirSync(place), [], 'nothing left: no target, no staging directory, no partial archive')
  t.notOk(fs.existsSync(path.join(env.cwd, 'evil.txt')), 'nothing written above the target')
  t.same(stateFiles(env), [], 'no resume state left')
  return down
}

t.test('the issue\'s chain: a link through a link of the archive that leads out on disk is refused', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const code = await uploadArchive(t, env, 'chain.tar', tarBytes([
    file('ok.txt', 'fine'),
    symlink('a/b/c/d/e/f/g/h/s', '../../../../../../../..'), // the tree's root, as text and on disk
    symlink('etc_link', 'a/b/c/d/e/f/g/h/s/../../../../../../../../../etc') // "etc" as text; /etc on disk
  ]))
  await refusedInto(t, env, code, [
    /unsafe archive: refused 1 entry, nothing was extracted/,
    /\n {2}etc_link: link target a\/b\/c\/d\/e\/f\/g\/h\/s\/(\.\.\/){9}etc leads outside the directory \(through the link a\/b\/c\/d\/e\/f\/g\/h\/s\)/
  ])
})

t.test('the same chain with the entries in reverse order is caught on disk before anything is moved into place', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  // When etc_link arrives, a/b/c/s is no link yet: only the extracted tree shows where it leads.
  const code = await uploadArchive(t, env, 'reversed.tar', tarBytes([
    symlink('etc_link', 'a/b/c/s/../../../../etc'),
    symlink('a/b/c/s', '../../..')
  ]))
  await refusedInto(t, env, code, [/\n {2}etc_link: link target a\/b\/c\/s\/\.\.\/\.\.\/\.\.\/\.\.\/etc leads outside the directory \(through the link a\/b\/c\/s\)/])
})

t.test('entries the extractor would skip are reported with exit 8, never dropped silently', async t => {
  const shapes: Array<[string, TarEntry[], RegExp, number?]> = [
    ['a FIFO', [file('ok.txt'), { path: 'pipe', type: 'FIFO' }], /\n {2}pipe: FIFO entries are not extracted/],
    ['a device', [file('ok.txt'), { path: 'null', type: 'CharacterDevice' }], /\n {2}null: CharacterDevice entries are not extracted/],
    ['a type tar does not know', [file('ok.txt'), { path: 'holes', type: 'SparseFile' }], /\n {2}holes: SparseFile entries are not extracted/],
    ['a file under a link', [dir('sub'), symlink('d', 'sub'), file('d/x.txt')], /\n {2}d\/x\.txt: under the link d: it would be written through it/],
    ['a hard link through a link', [dir('sub'), file('sub/f.txt'), symlink('d', 'sub'), hardlink('h', 'd/f.txt')], /\n {2}h: hard link through the link d/],
    ['a hard link to a link', [dir('sub'), symlink('sub/s', '../sub'), hardlink('s2', 'sub/s')], /\n {2}s2: hard link to the link sub\/s/],
    ['an absolute path', [file('ok.txt'), file('/abs.txt')], /\n {2}\/abs\.txt: absolute path/],
    ['a ".." path', [file('ok.txt'), file('../evil.txt')], /\n {2}\.\.\/evil\.txt: "\.\." in path/],
    ['an absolute link', [symlink('etc', '/etc')], /\n {2}etc: absolute link target \/etc/],
    ['a file under a refused link', [symlink('etc', '/etc'), file('etc/cron.d/job', '* * * * * root sh')], /\n {2}etc: absolute link target \/etc\n {2}etc\/cron\.d\/job: under the link etc/, 2],
    ['a hard link out', [hardlink('passwd', '../../../../etc/passwd')], /\n {2}passwd: hard link to \.\.\/\.\.\/\.\.\/\.\.\/etc\/passwd, outside the directory/]
  ]
  const env = cliEnv(t, server.url, API_KEY)
  for (const [what, entries, message, count = 1] of shapes) {
    const code = await uploadArchive(t, env, 'shape.tar', tarBytes(entries))
    const down = await refusedInto(t, env, code, [message])
    t.match(down.stderr, count === 1 ? /unsafe archive: refused 1 entry, nothing was extracted/ : `unsafe archive: refused ${count} entries, nothing was extracted`, what)
  }
})

t.test('every refused entry is counted, the first 20 named', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const code = await uploadArchive(t, env, 'many.tar', tarBytes(Array.from({ length: 25 }, (_, i) => symlink(`l${i}`, '/etc'))))
  const down = await refusedInto(t, env, code, [/refused 25 entries/, /\n {2}l0: absolute link target \/etc/, /\n {2}l19: /, /\(and 5 more\)/])
  t.notMatch(down.stderr, /\n {2}l20: /)
})

t.test('a gzip bomb is refused and leaves no partial file behind', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const code = await uploadArchive(t, env, 'bomb.tar.gz', gzipBomb('zeros.bin', 256 * MiB))
  await refusedInto(t, env, code, [/max decompression ratio exceeded/])
})

t.test('bounds: entries and bytes, raised with --max-entries and --max-size; over them nothing is left', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const many = await uploadArchive(t, env, 'many.tar', tarBytes([dir('d'), ...Array.from({ length: 30 }, (_, i) => file(`d/f${i}`, 'x'))]), 2)
  await refusedInto(t, env, many, [/archive refused: more than 30 entries \(raise the bound with --max-entries\)/], ['--max-entries', '30'])
  const out = path.join(env.cwd, 'many-out')
  const ok = await runCli(t, ['download', many, '--extract', '-o', out, '--max-entries', '31'], env)
  t.equal(ok.status, 0, ok.stderr)
  t.equal(fs.readdirSync(path.join(out, 'd')).length, 30, 'within the bound: all there')

  const big = await uploadArchive(t, env, 'big.tar', tarBytes([file('a', Buffer.alloc(MiB)), file('b', Buffer.alloc(MiB)), file('c', Buffer.alloc(MiB))]), 2)
  await refusedInto(t, env, big, [/archive refused: more than 2097152 bytes once extracted, at c \(raise the bound with --max-size\)/], ['--max-size', '2M'])
  const bigOut = path.join(env.cwd, 'big-out')
  const fine = await runCli(t, ['download', big, '--extract', '-o', bigOut], env)
  t.equal(fine.status, 0, fine.stderr)
  t.same(fs.readdirSync(bigOut).sort(), ['a', 'b', 'c'], 'the default bound (5 GiB) lets 3 MiB through')
})

t.test('an existing tree is never written into: the archive\'s top-level entries must be new', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  const dist = path.join(env.cwd, 'dist')
  fs.mkdirSync(path.join(dist, 'assets'), { recursive: true })
  fs.writeFileSync(path.join(dist, 'index.html'), 'new')
  fs.writeFileSync(path.join(dist, 'assets', 'app.js'), 'new js')
  const up = await runCli(t, ['upload', 'dist', '-q', '--max-downloads', '4'], env)
  t.equal(up.status, 0, up.stderr)
  const code = up.stdout.trim()

  // The default target is the current directory: dist/ lands beside what is there.
  const work = fs.mkdtempSync(path.join(env.cwd, 'work-'))
  fs.writeFileSync(path.join(work, 'keep.txt'), 'mine')
  const first = await runCli(t, ['download', code, '--extract'], { ...env, cwd: work })
  t.equal(first.status, 0, first.stderr)
  t.same(snapshot(work), { 'keep.txt': 'mine', dist: 'dir', 'dist/assets': 'dir', 'dist/assets/app.js': 'new js', 'dist/index.html': 'new' }, 'dist/ moved in; nothing else left')

  // dist/ exists now (a dirty workspace: a file edited, one removed, one the archive lacks): a
  // second extraction exits 8 and changes nothing (issue 24: it used to exit 0 over it, "verified",
  // with the stale files kept).
  fs.writeFileSync(path.join(work, 'dist', 'index.html'), 'edited')
  fs.rmSync(path.join(work, 'dist', 'assets', 'app.js'))
  fs.writeFileSync(path.join(work, 'dist', 'stale.txt'), 'not in the archive')
  const before = snapshot(work)
  const left = async () => (await fetch(`${server.url}/download/${code}`, { method: 'HEAD' })).headers.get('dropcode-downloads-left')
  const leftBefore = await left()
  const again = await runCli(t, ['download', code, '--extract'], { ...env, cwd: work })
  t.equal(again.status, 8, again.stderr)
  t.match(again.stderr, new RegExp(`${work.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} already has dist: --extract never writes into an existing tree; pass --force`))
  t.same(snapshot(work), before, 'the existing tree is untouched')
  t.equal(await left(), leftBefore, 'refused before the download: none spent')

  // --force replaces it whole: exactly the archive's tree, no stale file, keep.txt untouched.
  const forced = await runCli(t, ['download', code, '--extract', '--force'], { ...env, cwd: work })
  t.equal(forced.status, 0, forced.stderr)
  t.same(snapshot(work), { 'keep.txt': 'mine', dist: 'dir', 'dist/assets': 'dir', 'dist/assets/app.js': 'new js', 'dist/index.html': 'new' }, 'exactly the archive: the edit, the removal and the stale file are gone')
  t.notOk(fs.readdirSync(work).some(n => n.includes('dropcode')), 'no staging or set-aside directory left')
  fs.writeFileSync(path.join(work, 'dist', 'stale.txt'), 'not in the archive')
  const settled = snapshot(work)

  // A hostile archive into the same directory: refused, and the directory is as it was.
  const hostile = await uploadArchive(t, env, 'chain.tar', tarBytes([file('other.txt'), symlink('x/s', '..'), symlink('out', 'x/s/../..')]))
  const bad = await runCli(t, ['download', hostile, '--extract'], { ...env, cwd: work })
  t.equal(bad.status, 8, bad.stderr)
  t.match(bad.stderr, /\n {2}out: link target x\/s\/\.\.\/\.\. leads outside the directory \(through the link x\/s\)/)
  t.same(snapshot(work), settled, 'nothing added, nothing changed')
  t.same(stateFiles(env), [])
})
