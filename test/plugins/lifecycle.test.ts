/**
 * Shutdown behind a load balancer, with a real process and a keep-alive client: SIGTERM turns
 * /readyz to 503 while everything else is served for DRAIN_DELAY_SECONDS, each answer saying
 * Connection: close; then the listener closes, and in-flight work finishes within the grace;
 * every answer keeps the catalogue body and the request id (draining_refused_at_once).
 */
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import t from 'tap'
import { startServer } from '../helpers/server-process.js'
import { dataDir } from '../helpers/tmp.js'

interface Answer { status: number, headers: http.IncomingHttpHeaders, body: string }

function get (url: string, agent: http.Agent, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    http.request(url, { agent, method }, res => {
      let body = ''
      res.setEncoding('utf8').on('data', c => { body += c }).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
    }).on('error', reject).end()
  })
}

t.test('SIGTERM: readyz drains while the rest is served, then the listener closes and in-flight work finishes', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '2', SHUTDOWN_GRACE_SECONDS: '10' })
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => keepAlive.destroy())
  t.equal((await get(`${server.url}/healthz`, keepAlive)).status, 200)

  // An upload in flight across the whole shutdown: its body trickles in over ~3.5 s.
  const boundary = 'drain'
  const upload = http.request(`${server.url}/upload`, {
    method: 'POST',
    headers: { 'x-client-key': 'k', 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' }
  })
  const uploaded = new Promise<Answer>((resolve, reject) => {
    upload.on('response', res => {
      let body = ''
      res.setEncoding('utf8').on('data', c => { body += c }).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
    }).on('error', reject)
  })
  upload.write(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="slow.txt"\r\n\r\n`)
  const trickle = setInterval(() => upload.write('still coming '), 250)

  const exited = once(server.child, 'exit')
  const t0 = Date.now()
  server.child.kill('SIGTERM')
  await new Promise(resolve => setTimeout(resolve, 200))

  const ready = await get(`${server.url}/readyz`, keepAlive)
  t.equal(ready.status, 503, 'readyz: draining')
  t.same(JSON.parse(ready.body), { status: 'draining' })
  t.equal(ready.headers.connection, 'close', 'each answer while draining ends its connection: a balancer keeps no idle one to this instance')
  const health = await get(`${server.url}/healthz`, keepAlive)
  t.equal(health.status, 200, 'the rest is served as usual')
  t.equal(health.headers.connection, 'close')
  t.match(health.headers['x-request-id'], /\S/)
  const fresh = await get(`${server.url}/download/AAAAAA`, new http.Agent(), 'GET')
  t.equal(fresh.status, 404, 'new connections are still accepted while draining')
  t.match(fresh.headers['content-type'], /^text\/html/)

  await new Promise(resolve => setTimeout(resolve, 2500 - (Date.now() - t0)))
  const refused = await get(`${server.url}/healthz`, new http.Agent()).then(() => 'accepted', (err: NodeJS.ErrnoException) => err.code)
  t.equal(refused, 'ECONNREFUSED', 'after the drain delay the listener is closed')

  await new Promise(resolve => setTimeout(resolve, 1000))
  clearInterval(trickle)
  upload.end(`\r\n--${boundary}--\r\n`)
  const answer = await uploaded
  t.equal(answer.status, 200, 'the upload in flight finished within the grace')
  t.match(JSON.parse(answer.body), { code: /^[A-Za-z0-9]{6}$/ })
  t.equal(answer.headers.connection, 'close', 'and was told the connection closes')
  t.match(answer.headers['x-request-id'], /\S/)
  const [code] = await exited
  t.equal(code, 0, 'clean exit')
})

t.test('SIGTERM: a connection that never sent a byte does not hold the shutdown up to the grace period (silent_connection_holds_shutdown)', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '0', SHUTDOWN_GRACE_SECONDS: '20' })
  // A balancer's (or a client pool's) connection opened ahead of use, or a client that
  // connected and said nothing yet: Node counts it neither idle nor busy.
  const { port } = new URL(server.url)
  const silent = net.connect(Number(port), '127.0.0.1')
  await once(silent, 'connect')
  t.teardown(() => silent.destroy())
  const closedBy = once(silent, 'close')
  const exited = once(server.child, 'exit')
  const t0 = Date.now()
  server.child.kill('SIGTERM')
  const [code] = await exited
  const ms = Date.now() - t0
  t.equal(code, 0, 'clean exit')
  t.ok(ms < 10_000, `exited ${ms} ms after SIGTERM, not at the end of the 20 s grace`)
  await closedBy
})

t.test('SIGTERM: a connection whose request arrives just after the listener closed is answered, not reset (balancer_request_reset_at_close)', async t => {
  // nginx connects to an instance and then writes its request; destroying the connection before
  // the request was read reset it, and nginx answered the upload 502 (found by
  // test/e2e/balancers/rolling-restart.test.ts).
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '0', SHUTDOWN_GRACE_SECONDS: '20' })
  const { port } = new URL(server.url)
  const socket = net.connect(Number(port), '127.0.0.1')
  await once(socket, 'connect')
  t.teardown(() => socket.destroy())
  let answer = ''
  socket.setEncoding('utf8').on('data', (c: string) => { answer += c })
  const ended = once(socket, 'close')
  const exited = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal(await new Promise(resolve => net.connect(Number(port), '127.0.0.1').once('connect', () => resolve('accepted')).once('error', (err: NodeJS.ErrnoException) => resolve(err.code))), 'ECONNREFUSED', 'the listener is closed')
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  await ended
  t.match(answer, /^HTTP\/1\.1 200 /, 'the request is answered')
  t.match(answer, /\r\nconnection: close\r\n/i, 'and its connection closed after it')
  const [code] = await exited
  t.equal(code, 0, 'clean exit')
})

t.test('SIGTERM: a keep-alive connection whose response started before the drain is not ended under the balancer: its next request is answered and told to close (keepalive_end_races_next_request)', async t => {
  // The server ended such a connection as its response ended. The response had gone out
  // without Connection: close, so a balancer kept the connection and could send its next
  // request on it just as our FIN arrived: nginx answered that request 502 (once in ~1,300
  // requests of test/e2e/balancers/rolling-restart.test.ts, in CI).
  // A drain long enough for a loaded machine to read the download and wait well within it.
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k', DRAIN_DELAY_SECONDS: '10', SHUTDOWN_GRACE_SECONDS: '10' })
  const size = 16 * 1024 * 1024
  const form = new FormData()
  form.append('file', new Blob([Buffer.alloc(size, 'd')]), 'big.bin')
  const { code } = await (await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': 'k' }, body: form })).json() as { code: string }

  const { port } = new URL(server.url)
  const socket = net.connect(Number(port), '127.0.0.1')
  await once(socket, 'connect')
  t.teardown(() => socket.destroy())
  // Bytes received, kept whole only from `keepFrom` on (the download's body is only counted).
  let total = 0
  let keepFrom = 0
  let kept = Buffer.alloc(0)
  socket.on('data', (c: Buffer) => {
    if (total + c.length > keepFrom) kept = Buffer.concat([kept, c.subarray(Math.max(0, keepFrom - total))])
    total += c.length
  })
  let ended = false
  socket.on('end', () => { ended = true })
  socket.write(`GET /download/${code} HTTP/1.1\r\nHost: x\r\n\r\n`)
  // The response has started; reading stops, so it is still running when SIGTERM arrives.
  await new Promise<void>(resolve => { socket.once('data', () => { socket.pause(); resolve() }) })
  const exited = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  const killedAt = Date.now()
  await new Promise(resolve => setTimeout(resolve, 300))
  socket.resume()
  /** The next whole response from `keepFrom` on: its head, and where the one after starts. */
  const whole = async (): Promise<{ head: string, end: number }> => {
    for (const deadline = Date.now() + 10_000; ;) {
      const at = kept.indexOf('\r\n\r\n')
      if (at >= 0) {
        const head = kept.subarray(0, at).toString('latin1')
        const end = keepFrom + at + 4 + Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0)
        if (total >= end) return { head, end }
      }
      if (ended) throw new Error(`connection ended after ${total} bytes`)
      if (Date.now() > deadline) throw new Error(`no whole response within 10 s (${total} bytes)`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  }
  const first = await whole()
  keepFrom = first.end
  kept = Buffer.alloc(0)
  t.match(first.head, /^HTTP\/1\.1 200 /, 'the download that started before the drain completes')
  t.notMatch(first.head, /\r\nconnection: close\r\n/i, 'its headers went out before the drain: the client may keep the connection')
  await new Promise(resolve => setTimeout(resolve, 300))
  const killedAgo = Date.now() - killedAt
  if (killedAgo > 9000) throw new Error(`the download took until ${killedAgo} ms after SIGTERM: too close to the end of the drain to tell`)
  t.notOk(ended, 'the server did not end it under a client that may be sending its next request')
  const closed = once(socket, 'close')
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  const second = await whole()
  t.match(second.head, /^HTTP\/1\.1 200 /, 'the next request on it is answered')
  t.match(second.head, /\r\nconnection: close\r\n/i, 'and told the connection closes')
  await closed
  const [exitCode] = await exited
  t.equal(exitCode, 0, 'clean exit')
})
