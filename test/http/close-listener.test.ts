/**
 * src/http/close-listener.ts: a listener closed while clients connect resets none that the
 * kernel had completed. The clients are real curl processes connecting while the process is
 * busy (a stalled loop, as on a loaded CI machine or in a GC pause), which is how an instance's
 * drain lost two uploads behind nginx (listener_close_resets_queued_connections).
 */
import { once } from 'node:events'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { closeAfterPoll } from '../../src/http/close-listener.js'
import { curl } from '../helpers/curl.js'

/** Clients started during each stall. */
const CLIENTS = 5
/** ms each stall lasts: long enough for every curl to start and connect. */
const STALL_MS = 1500

function busyWait (ms: number): void {
  const end = Date.now() + ms
  while (Date.now() < end) { /* the loop is stalled */ }
}

/** The HTTP status curl got, or its exit code and error (a reset: `curl 56 … reset by peer`). */
async function status (url: string): Promise<string> {
  const res = await curl(['-sS', '--max-time', '20', '-o', '/dev/null', '-w', '%{http_code}', url])
  return res.code === 0 ? res.stdout : `curl ${res.code} ${res.stdout} ${res.stderr.trim()}`
}

async function listeningServer (t: Test): Promise<{ server: http.Server, url: string }> {
  const server = http.createServer((_req, res) => { res.end('ok') })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` }
}

/** Starts the clients and stalls the loop while they connect; their results once done. */
function clientsDuringStall (url: string): Promise<string[]> {
  const results = Array.from({ length: CLIENTS }, async () => await status(url))
  busyWait(STALL_MS)
  return Promise.all(results)
}

t.test('clients connecting while the loop stalls before the close are answered, not reset', async t => {
  const { server, url } = await listeningServer(t)
  let results: Promise<string[]> | undefined
  // Queued first: runs in the same check phase as the close's first step, before it.
  setImmediate(() => { results = clientsDuringStall(url) })
  await closeAfterPoll(server)
  t.same(await results, Array(CLIENTS).fill('200'), 'every client that connected before the close got its answer')
})

t.test('clients connecting while the loop stalls between a poll and the close are answered, not reset', async t => {
  const { server, url } = await listeningServer(t)
  // A byte on a socket of our own makes its 'data' callback run in the next poll: the stall
  // comes after that poll has accepted, before the next check phase.
  const peer = net.createServer()
  peer.listen(0, '127.0.0.1')
  await once(peer, 'listening')
  t.teardown(() => { peer.close() })
  const client = net.connect((peer.address() as AddressInfo).port, '127.0.0.1')
  const [accepted] = await once(peer, 'connection') as [net.Socket]
  t.teardown(() => { client.destroy(); accepted.destroy() })
  let results: Promise<string[]> | undefined
  accepted.once('data', () => { results = clientsDuringStall(url) })
  const closed = closeAfterPoll(server)
  // Queued after the close's first step: the byte arrives before the next poll.
  setImmediate(() => { client.write('x') })
  await closed
  t.ok(results !== undefined, 'the stall ran before the listener closed')
  t.same(await results, Array(CLIENTS).fill('200'), 'every client that connected before the close got its answer')
})

t.test('a loop that never gets a quick iteration still closes within the bound', async t => {
  const { server } = await listeningServer(t)
  // 20 ms of work in every iteration.
  let busy = setImmediate(function spin () { busyWait(20); busy = setImmediate(spin) })
  t.teardown(() => clearImmediate(busy))
  const started = Date.now()
  await closeAfterPoll(server, { withinMs: 300 })
  const took = Date.now() - started
  t.ok(took >= 300 && took < 1000, `closed after ${took} ms`)
  t.notOk(server.listening, 'the listener is closed')
})
