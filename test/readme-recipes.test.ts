/**
 * The README's shell recipes, run as written against the real server process, the way a new
 * user runs them: the chunked-upload script (bash + curl) and `curl -fOJ`. Found by trying
 * them: the old loop printed nothing and exited 0 with a wrong key, died with a bash syntax
 * error on an expired session, and `curl -OJ` saved the 404 page as the artifact; behind a
 * load balancer whose timeout lost /upload/complete's answer, the rerun said to start over
 * (verify answered 404) though a repeated complete would have answered the code.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import t, { type Test } from 'tap'
import { root, startServer, stopServer } from './helpers/server-process.js'
import { dataDir } from './helpers/tmp.js'

const KEY = 'readme-key'

/** The fenced block after the marker comment, exactly as the docs show it (docs/api.md, "Chunked uploads"). */
function readmeScript (marker: string): string {
  const page = fs.readFileSync(path.join(root, 'docs/api.md'), 'utf8')
  const m = new RegExp(`<!-- ${marker}[^>]*-->\\n\`\`\`bash\\n([\\s\\S]*?)\`\`\``).exec(page)
  if (m === null) throw new Error(`docs/api.md has no block marked ${marker}`)
  return m[1]!
}

interface Run { code: number, stdout: string, stderr: string }
const run = async (cmd: string, args: string[], opts: { cwd: string, env?: Record<string, string> }): Promise<Run> =>
  await new Promise(resolve => {
    execFile(cmd, args, { cwd: opts.cwd, env: { PATH: process.env.PATH, ...opts.env } }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr })
    })
  })

t.test('the README chunked-upload script: progress, code on stdout, resume, loud failures (readme_chunked_loop)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const dir = dataDir(t)
  fs.writeFileSync(path.join(dir, 'chunked-upload.sh'), readmeScript('chunked-upload.sh'))
  const bytes = randomBytes(20 * 1024 * 1024 + 5) // three 8 MiB chunks
  fs.writeFileSync(path.join(dir, 'big.bin'), bytes)
  const script = (key: string) => run('bash', ['chunked-upload.sh', 'big.bin'], { cwd: dir, env: { DROPCODE_URL: server.url, DROPCODE_KEY: key } })

  const wrongKey = await script('not-the-key')
  t.equal(wrongKey.code, 1, 'a wrong key: exit 1')
  t.equal(wrongKey.stdout, '', 'nothing on stdout')
  t.match(wrongKey.stderr, /dropcode: \/upload\/start failed: \{"error":"Missing or invalid API key[^"]*","code":"DROPCODE_UNAUTHORIZED"\}/, 'the service\'s message')
  t.notOk(fs.existsSync(path.join(dir, 'big.bin.dropcode-session')), 'no session saved')

  fs.writeFileSync(path.join(dir, 'big.bin.dropcode-session'), 'AAAAAAAAAAAAAAAAAAAAAA\n')
  const expired = await script(KEY)
  t.equal(expired.code, 1, 'an expired session: exit 1')
  t.match(expired.stderr, /\/upload\/verify failed: .*DROPCODE_SESSION_NOT_FOUND/, 'the service says the session is gone')
  t.notMatch(expired.stderr, /syntax error/)
  fs.rmSync(path.join(dir, 'big.bin.dropcode-session'))

  // Interrupted after the first chunk: a session saved, chunk 0 sent by hand; the rerun sends the rest.
  const start = new FormData()
  start.append('filename', 'big.bin')
  start.append('total_chunks', '3')
  const { upload_id: id } = await (await fetch(`${server.url}/upload/start`, { method: 'POST', headers: { 'x-client-key': KEY }, body: start })).json() as { upload_id: string }
  const chunk0 = new FormData()
  chunk0.append('upload_id', id)
  chunk0.append('chunk_index', '0')
  chunk0.append('chunk', new Blob([bytes.subarray(0, 8 * 1024 * 1024)]), 'chunk')
  t.equal((await fetch(`${server.url}/upload/chunk`, { method: 'POST', headers: { 'x-client-key': KEY }, body: chunk0 })).status, 200)
  fs.writeFileSync(path.join(dir, 'big.bin.dropcode-session'), `${id}\n`)
  const resumed = await script(KEY)
  t.equal(resumed.code, 0, resumed.stderr)
  t.match(resumed.stdout, /^[A-Za-z0-9]{6}\n$/, 'only the code on stdout')
  t.same(resumed.stderr.trim().split('\n'), ['dropcode: chunk 1 sent (2 of 3, 66 %)', 'dropcode: chunk 2 sent (3 of 3, 100 %)'], 'progress, and only the missing chunks sent')
  t.notOk(fs.existsSync(path.join(dir, 'big.bin.dropcode-session')), 'the saved session is removed once complete')

  const out = fs.mkdtempSync(path.join(dir, 'dl-'))
  const got = await run('curl', ['-sfOJ', `${server.url}/download/${resumed.stdout.trim()}`], { cwd: out })
  t.equal(got.code, 0)
  t.ok(fs.readFileSync(path.join(out, 'big.bin')).equals(bytes), 'curl -fOJ saves the same bytes under the name')
  t.equal(await stopServer(server), 0)
})

/**
 * A balancer in front of the service whose timeout fires on /upload/complete: the request goes
 * through and the service completes the session, but the client gets a 504 page instead of the
 * answer (kept in `lost`). Everything else passes.
 */
async function timingOutBalancer (t: Test, upstream: string) {
  const lost: string[] = []
  const server = http.createServer((req, res) => {
    const up = http.request(`${upstream}${req.url!}`, { method: req.method, headers: req.headers, agent: false }, upRes => {
      if (req.url !== '/upload/complete') {
        res.writeHead(upRes.statusCode!, upRes.headers)
        upRes.pipe(res)
        return
      }
      const body: Buffer[] = []
      upRes.on('data', (c: Buffer) => body.push(c))
      upRes.on('end', () => {
        lost.push(Buffer.concat(body).toString())
        res.writeHead(504, { 'content-type': 'text/html', connection: 'close' }).end('<html><body><h1>504 Gateway Time-out</h1></body></html>\n')
      })
    })
    up.on('error', () => res.destroy())
    req.pipe(up)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, lost }
}

t.test('the README chunked-upload script, rerun after the balancer lost /upload/complete\'s answer, prints the same code (readme_complete_answer_lost)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const balancer = await timingOutBalancer(t, server.url)
  const dir = dataDir(t)
  fs.writeFileSync(path.join(dir, 'chunked-upload.sh'), readmeScript('chunked-upload.sh'))
  const bytes = randomBytes(9 * 1024 * 1024) // two chunks
  fs.writeFileSync(path.join(dir, 'big.bin'), bytes)
  const script = () => run('bash', ['chunked-upload.sh', 'big.bin'], { cwd: dir, env: { DROPCODE_URL: balancer.url, DROPCODE_KEY: KEY } })

  const first = await script()
  t.equal(first.code, 1, 'the lost answer fails the first run')
  t.equal(first.stdout, '')
  t.match(first.stderr, /dropcode: \/upload\/complete failed: .*504 Gateway Time-out/)
  t.ok(fs.existsSync(path.join(dir, 'big.bin.dropcode-session')), 'the session is kept for a rerun')
  const [answer] = balancer.lost
  const { code } = JSON.parse(answer!) as { code: string }

  const rerun = await script()
  t.equal(rerun.code, 0, rerun.stderr)
  t.equal(rerun.stdout, `${code}\n`, 'the code the lost answer had, alone on stdout')
  t.equal(rerun.stderr, '', 'nothing sent again')
  t.equal(balancer.lost.length, 1, 'no second complete')
  t.notOk(fs.existsSync(path.join(dir, 'big.bin.dropcode-session')), 'the saved session is removed')
  const got = await fetch(`${server.url}/download/${code}`)
  t.ok(Buffer.from(await got.arrayBuffer()).equals(bytes), 'the code gives the file')
  t.equal(await stopServer(server), 0)
})

t.test('curl -fOJ on an unknown code saves nothing and fails; plain -OJ would save the page (readme_curl_fail)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const withF = fs.mkdtempSync(path.join(dataDir(t), 'f-'))
  const failed = await run('curl', ['-sfOJ', `${server.url}/download/ZZZZZZ`], { cwd: withF })
  t.equal(failed.code, 22, 'curl -f exits 22')
  t.same(fs.readdirSync(withF), [], 'nothing saved')
  const without = fs.mkdtempSync(path.join(dataDir(t), 'plain-'))
  const silent = await run('curl', ['-sOJ', `${server.url}/download/ZZZZZZ`], { cwd: without })
  t.equal(silent.code, 0, 'why the README says -f: without it curl exits 0…')
  t.same(fs.readdirSync(without), ['ZZZZZZ'], '…having saved the HTML error page as the artifact')
  t.equal(await stopServer(server), 0)
})

t.test('what the README warns of curl -OJ: a name that exists costs the download anyway; the name is the ASCII fallback (readme_curl_spent)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: KEY })
  const res = await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': KEY }, body: (() => { const f = new FormData(); f.append('file', new Blob(['hallo']), 'über.txt'); f.append('max_downloads', '2'); return f })() })
  const { code } = await res.json() as { code: string }
  const dir = fs.mkdtempSync(path.join(dataDir(t), 'curl-'))
  t.equal((await run('curl', ['-sfOJ', `${server.url}/download/${code}`], { cwd: dir })).code, 0)
  t.same(fs.readdirSync(dir), ['uber.txt'], 'curl ignores filename*: über.txt arrives under its ASCII fallback')
  const again = await run('curl', ['-sfOJ', `${server.url}/download/${code}`], { cwd: dir })
  t.equal(again.code, 23, 'curl refuses to overwrite uber.txt (exit 23)…')
  t.equal((await fetch(`${server.url}/download/${code}`, { method: 'HEAD' })).status, 404, '…after the download was claimed: both of max_downloads=2 are spent')
  t.equal(await stopServer(server), 0)
})
