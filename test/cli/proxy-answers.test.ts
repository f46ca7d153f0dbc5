/**
 * Answers that are not the service's: a proxy's own pages (nginx's 413 for a body over
 * client_max_body_size, a 404 for a path it does not pass on, a 502) carry no
 * `Dropcode-Version`, and the CLI said only `dropcode: 413` or, for a 404, "no file with code",
 * as if the service had answered. The real CLI against a tiny server that answers as nginx
 * does, and against the real service (whose own refusals keep their messages).
 */
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import t, { type Test } from 'tap'
import { API_KEY, testEnv } from '../helpers/app.js'
import { startServer } from '../helpers/server-process.js'
import { cliEnv, runCli } from './run.js'

const DOCS = 'see the load-balancer docs (docs/load-balancers.md)'

/** nginx's own error page, byte for byte as nginx 1.22 writes it. */
const nginxPage = (status: string) =>
  `<html>\r\n<head><title>${status}</title></head>\r\n<body>\r\n<center><h1>${status}</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n`

type Answer = { status: number, reason: string, type?: string, body?: string, headers?: Record<string, string> } | 'forward-without-version'

/**
 * A tiny stand-in for a proxy: answers each request as `decide` says, at once (as nginx answers
 * 413 on the declared length, before the body), or forwards it to `upstream` without the
 * service's Dropcode-Version header (a proxy that drops headers it does not know).
 */
async function startFakeProxy (t: Test, upstream: string, decide: (req: http.IncomingMessage) => Answer) {
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    seen.push(`${req.method!} ${req.url!}`)
    const answer = decide(req)
    if (answer === 'forward-without-version') {
      const up = http.request(`${upstream}${req.url!}`, { method: req.method, headers: req.headers }, upRes => {
        const { 'dropcode-version': _dropped, ...headers } = upRes.headers
        res.writeHead(upRes.statusCode!, headers)
        upRes.pipe(res)
      })
      up.on('error', () => res.destroy())
      req.pipe(up)
      return
    }
    // Read and drop the body while answering, as nginx's lingering close does: a client still
    // sending is not cut before it reads the answer.
    req.resume()
    const body = answer.body ?? nginxPage(`${answer.status} ${answer.reason}`)
    res.writeHead(answer.status, answer.reason, { server: 'nginx/1.22.1', 'content-type': answer.type ?? 'text/html', 'content-length': Buffer.byteLength(body), ...answer.headers })
    res.end(req.method === 'HEAD' ? undefined : body)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

const server = await startServer(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn', MAX_FILE_SIZE: '1000' }))

t.test('nginx\'s own 413 page: one line naming the proxy, exit 7, no retry', async t => {
  const proxy = await startFakeProxy(t, server.url, () => ({ status: 413, reason: 'Request Entity Too Large' }))
  const env = cliEnv(t, proxy.url, API_KEY)
  // Over nginx's default client_max_body_size (1 MiB).
  fs.writeFileSync(path.join(env.cwd, 'f.bin'), Buffer.alloc(2 * 1024 * 1024))
  const up = await runCli(t, ['upload', 'f.bin', '-q'], env)
  t.equal(up.status, 7)
  t.equal(up.stderr, `dropcode: a proxy between you and the service refused the request: 413 Request Entity Too Large (no Dropcode-Version header), ${DOCS}\n`)
  t.equal(up.stdout, '')
  t.same(proxy.seen, ['POST /upload'], 'a refusal is final')
})

t.test('a proxy\'s 404 is not "no such code": exit 7 for info, download and delete', async t => {
  const proxy = await startFakeProxy(t, server.url, () => ({ status: 404, reason: 'Not Found' }))
  const env = cliEnv(t, proxy.url, API_KEY)
  for (const args of [['info', 'ABCDEF'], ['download', 'ABCDEF'], ['delete', 'ABCDEF']]) {
    const r = await runCli(t, args, env)
    t.equal(r.status, 7, args.join(' '))
    t.equal(r.stderr, `dropcode: a proxy between you and the service refused the request: 404 Not Found (no Dropcode-Version header), ${DOCS}\n`)
  }
})

t.test('a proxy\'s 502 is retried as before; the final message names the proxy, exit 6', async t => {
  const proxy = await startFakeProxy(t, server.url, () => ({ status: 502, reason: 'Bad Gateway' }))
  const env = cliEnv(t, proxy.url, API_KEY)
  const r = await runCli(t, ['info', 'ABCDEF', '--retries', '1'], env)
  t.equal(r.status, 6)
  t.match(r.stderr, /^info: a proxy between you and the service answered 502 Bad Gateway \(no Dropcode-Version header\); retrying in [\d.]+ s\n/)
  t.match(r.stderr, `\ndropcode: info: a proxy between you and the service answered 502 Bad Gateway (no Dropcode-Version header) (after 2 attempts), ${DOCS}\n`)
  t.same(proxy.seen, ['HEAD /download/ABCDEF', 'HEAD /download/ABCDEF'])
})

t.test('a proxy\'s 409 with Retry-After spends retries (only the service\'s names a lease to wait out): exit 7', async t => {
  // Waiting out a lease spends no retry for up to 15 minutes: taken for a proxy's 409, the CLI
  // asked again every second for that long.
  const proxy = await startFakeProxy(t, server.url, () => ({ status: 409, reason: 'Conflict', body: '<html>busy</html>', headers: { 'retry-after': '1' } }))
  const env = cliEnv(t, proxy.url, API_KEY)
  const started = Date.now()
  const r = await runCli(t, ['info', 'ABCDEF', '--retries', '2'], env)
  t.equal(r.status, 7, r.stderr)
  t.match(r.stderr, `\ndropcode: info: a proxy between you and the service answered 409 Conflict (no Dropcode-Version header) (after 3 attempts), ${DOCS}\n`)
  t.same(proxy.seen, ['HEAD /download/ABCDEF', 'HEAD /download/ABCDEF', 'HEAD /download/ABCDEF'])
  t.ok(Date.now() - started < 60_000, 'gave up after its retries')
})

t.test('a 200 page where JSON was expected (not a dropcode service): exit 7', async t => {
  const proxy = await startFakeProxy(t, server.url, () => ({ status: 200, reason: 'OK', body: '<html>Welcome to the hotel Wi-Fi</html>' }))
  const env = cliEnv(t, proxy.url, API_KEY)
  const r = await runCli(t, ['delete', 'ABCDEF'], env)
  t.equal(r.status, 7)
  t.equal(r.stderr, `dropcode: something that is not a dropcode service answered: 200 OK, text/html (no Dropcode-Version header); check --url, ${DOCS}\n`)
})

t.test('the service\'s own refusals keep their messages and exit codes', async t => {
  const env = cliEnv(t, server.url, API_KEY)
  fs.writeFileSync(path.join(env.cwd, 'big.bin'), Buffer.alloc(4096))
  const tooLarge = await runCli(t, ['upload', 'big.bin', '-q'], env)
  t.equal(tooLarge.status, 7)
  // "413 DROPCODE_FILE_TOO_LARGE: …", or with the limit named (refusals.ts) "refused: … (413 DROPCODE_FILE_TOO_LARGE)"
  t.match(tooLarge.stderr, /^dropcode: .*413 DROPCODE_FILE_TOO_LARGE/)
  t.notMatch(tooLarge.stderr, /proxy/)
  t.match((await runCli(t, ['upload', 'big.bin', '-q', '--key', 'wrong'], env)).stderr, /^dropcode: 401 DROPCODE_UNAUTHORIZED/)
  const unknown = await runCli(t, ['info', 'ZZZZZZ'], env)
  t.equal(unknown.status, 4)
  t.match(unknown.stderr, /no file with code ZZZZZZ/)

  // Through a proxy that drops the header: the JSON error is still recognised as the service's.
  const stripping = await startFakeProxy(t, server.url, () => 'forward-without-version')
  const through = await runCli(t, ['upload', 'big.bin', '-q'], { ...env, url: stripping.url })
  t.equal(through.status, 7)
  t.match(through.stderr, /^dropcode: .*413 DROPCODE_FILE_TOO_LARGE/)
  fs.writeFileSync(path.join(env.cwd, 'small.txt'), 'hello')
  const small = await runCli(t, ['upload', 'small.txt'], { ...env, url: stripping.url })
  t.equal(small.status, 0, `a success without the header is still a success: ${small.stderr}`)
  t.match(small.stdout, /^[A-Za-z0-9]{6}\n$/)
})
