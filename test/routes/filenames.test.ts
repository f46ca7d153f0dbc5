/**
 * Filenames as real clients send and save them: Node's fetch and curl escape `"` and CR/LF in a
 * multipart filename (%22, %0D, %0A); curl -OJ saves under the ASCII fallback of
 * Content-Disposition, which should read like the name.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { API_KEY, startApp, testConfig, upload } from '../helpers/app.js'
import { dataDir } from '../helpers/tmp.js'

const run = promisify(execFile)

t.test('a quote in a filename survives fetch\'s %22 (multipart_filename_escapes)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}))
  const up = await upload(url, [['file', { data: 'x', filename: 'say "hi".txt' }]])
  const res = await fetch(`${url}/download/${up.body.code}`, { method: 'HEAD' })
  t.equal(res.headers.get('content-disposition'), 'attachment; filename="say _hi_.txt"; filename*=UTF-8\'\'say%20%22hi%22.txt', 'the real name in filename*, no literal %22')
  const crlf = await upload(url, [['file', { data: 'x', filename: 'two\r\nlines.txt' }]])
  t.equal((await fetch(`${url}/download/${crlf.body.code}`, { method: 'HEAD' })).headers.get('content-disposition'), 'attachment; filename="twolines.txt"', 'CR/LF decoded, then removed')
  const literal = await upload(url, [['file', { data: 'x', filename: '100%25 done.txt' }]])
  t.match((await fetch(`${url}/download/${literal.body.code}`, { method: 'HEAD' })).headers.get('content-disposition'), /filename\*=UTF-8''100%2525%20done\.txt/, 'other escapes stay literal')
})

t.test('curl uploads and curl -OJ saves under a readable name (ascii_fallback_transliterated)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}))
  const dir = dataDir(t)
  const cases: Array<[string, string]> = [
    ['say "hi".txt', 'say _hi_.txt'],
    ['résumé 2026.pdf', 'resume 2026.pdf'],
    ['Ｆｕｌｌ ﬁle 🚀.txt', 'Full file _.txt']
  ]
  for (const [name, saved] of cases) {
    const src = path.join(dir, 'source.bin')
    fs.writeFileSync(src, name)
    const { stdout } = await run('curl', ['-sf', '-H', `X-Client-Key: ${API_KEY}`, '-F', `file=@${src};filename=${name}`, `${url}/upload`])
    const { code } = JSON.parse(stdout) as { code: string }
    const out = fs.mkdtempSync(path.join(dir, 'dl-'))
    await run('curl', ['-sfOJ', `${url}/download/${code}`], { cwd: out })
    t.same(fs.readdirSync(out), [saved], `${name} → ${saved}`)
  }
})
