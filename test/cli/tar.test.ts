/**
 * tarSize (src/cli/tar.ts) counts a directory's tar from its metadata alone; it must equal the
 * bytes packDirectory streams, for every kind of entry node-tar treats apart: long and
 * non-ASCII names (pax headers), sizes around the 512-byte blocks, empty files and
 * directories, symbolic links with short and long targets, hard links (the second one is a
 * Link entry without data), and a tree of many small files.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { packDirectory, tarSize } from '../../src/cli/tar.js'
import { bytes } from '../helpers/streams.js'

async function streamed (dir: string): Promise<number> {
  let n = 0
  for await (const data of packDirectory(dir) as AsyncIterable<Buffer>) n += data.length
  return n
}

function tree (t: Test): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-tar-'))
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }))
  return path.join(root, 'dist')
}

t.test('counts what node-tar writes, entry kind by entry kind', async t => {
  const dir = tree(t)
  fs.mkdirSync(path.join(dir, 'empty'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'a', 'b', 'c'), { recursive: true })
  for (const size of [0, 1, 511, 512, 513, 4096, 100_000]) fs.writeFileSync(path.join(dir, 'a', `f${size}.bin`), bytes(size, size + 1))
  fs.writeFileSync(path.join(dir, `${'n'.repeat(99)}.txt`), 'a name of 103 characters: over ustar\'s 100')
  const deep = path.join(dir, 'd'.repeat(90), 'e'.repeat(90))
  fs.mkdirSync(deep, { recursive: true })
  fs.writeFileSync(path.join(deep, `${'f'.repeat(120)}.js`), 'a path past ustar\'s prefix and name')
  fs.writeFileSync(path.join(dir, 'café-日本.txt'), 'non-ASCII')
  fs.symlinkSync('a/f1.bin', path.join(dir, 'short-link'))
  fs.symlinkSync(`a/b/c/${'x'.repeat(120)}`, path.join(dir, 'long-link'))
  fs.writeFileSync(path.join(dir, 'a', 'hard.bin'), bytes(3000, 9))
  fs.linkSync(path.join(dir, 'a', 'hard.bin'), path.join(dir, 'hard-again.bin'))
  const counted = await tarSize(dir)
  t.equal(counted, await streamed(dir), `${counted} bytes`)
})

t.test('an empty directory, and one of many small files', async t => {
  const empty = tree(t)
  fs.mkdirSync(empty)
  t.equal(await tarSize(empty), await streamed(empty))

  const many = tree(t)
  for (let i = 0; i < 600; i++) {
    const sub = path.join(many, `d${i % 12}`)
    fs.mkdirSync(sub, { recursive: true })
    fs.writeFileSync(path.join(sub, `f${i}.txt`), bytes(100 + (i * 7919) % 7900, i))
  }
  t.equal(await tarSize(many), await streamed(many))
})

t.test('a tree that changes after it was counted streams another size (which the sender must check)', async t => {
  const dir = tree(t)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'a.txt'), 'x')
  const before = await tarSize(dir)
  fs.writeFileSync(path.join(dir, 'a.txt'), bytes(2000, 3))
  t.not(await streamed(dir), before)
})
