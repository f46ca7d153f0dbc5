/**
 * What the nginx recipe does with a request that an instance resets before answering
 * (docs/load-balancers.md, src/plugins/lifecycle.ts rely on it): a GET, HEAD or DELETE goes to
 * the other instance; an upload is answered 502, never resent (nginx cannot resend a body it
 * streamed, and never resends a POST that reached an instance). So a stopping instance must
 * reset nothing: what it resets is an upload lost.
 *
 * Driven with the real nginx in front of one real instance and one that resets every request
 * as soon as it arrives (a fault the real service produces only by chance, at the instant its
 * listener closes).
 */
import { once } from 'node:events'
import net from 'node:net'
import t from 'tap'
import { API_KEY } from '../../helpers/app.js'
import { startBalancer } from '../../helpers/balancers.js'
import { startServer } from '../../helpers/server-process.js'
import { dataDir } from '../../helpers/tmp.js'

t.test('nginx: a GET, HEAD or DELETE reset by one instance is answered by the other; an upload is not resent', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: API_KEY, MAX_DOWNLOADS: '1000' })
  let resets = 0
  const resetting = net.createServer(socket => { socket.once('data', () => { resets++; socket.resetAndDestroy() }) })
  resetting.listen(0, '127.0.0.1')
  await once(resetting, 'listening')
  t.teardown(() => { resetting.close() })
  const { port } = resetting.address() as net.AddressInfo
  const lb = await startBalancer(t, 'nginx', [`127.0.0.1:${port}`, new URL(server.url).host])

  // Uploads until one reached the real instance (one that reached the resetting one is a 502:
  // nginx never resends a POST, and the client repeats it).
  let code: string | undefined
  for (let i = 0; i < 10 && code === undefined; i++) {
    const form = new FormData()
    form.append('file', new Blob(['retried elsewhere']), 'r.txt')
    form.append('max_downloads', '1000')
    const res = await fetch(`${lb.url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: form })
    if (res.status === 200) code = ((await res.json()) as { code: string }).code
    else t.equal(res.status, 502, 'an upload that reached the resetting instance is not resent')
  }
  if (code === undefined) throw new Error('no upload reached the real instance in 10 tries')

  const before = resets
  const answers: number[] = []
  for (let i = 0; i < 10; i++) {
    answers.push((await fetch(`${lb.url}/download/${code}`)).status)
    answers.push((await fetch(`${lb.url}/download/${code}`, { method: 'HEAD' })).status)
    answers.push((await fetch(`${lb.url}/healthz`)).status)
  }
  t.ok(resets - before >= 10, `the resetting instance was sent ${resets - before} of the ${answers.length} requests`)
  t.same(answers, answers.map(() => 200), 'every GET and HEAD is answered 200 by the other instance')
  const deleted = await fetch(`${lb.url}/delete/${code}`, { method: 'DELETE' })
  t.equal(deleted.status, 200, `DELETE is answered (${deleted.status})`)
})
