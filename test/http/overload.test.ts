/**
 * Overload: transfers beyond the per-instance limits and requests arriving while the event
 * loop lags are refused with 503 DROPCODE_BUSY and Retry-After, never queued into an OOM;
 * health, readiness and metrics (their own listener) stay answered.
 */
import http from 'node:http'
import t from 'tap'
import { API_KEY, startApp, testConfig, upload } from '../helpers/app.js'

/** Starts an upload whose body trickles in until `finish()` is called. */
function slowUpload (url: string) {
  const req = http.request(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': 'multipart/form-data; boundary=b', 'transfer-encoding': 'chunked' } })
  const answer = new Promise<{ status: number, body: string }>((resolve, reject) => {
    req.on('response', res => { let body = ''; res.setEncoding('utf8').on('data', c => { body += c }).on('end', () => resolve({ status: res.statusCode!, body })) }).on('error', reject)
  })
  req.write('--b\r\ncontent-disposition: form-data; name="file"; filename="slow"\r\n\r\nsome bytes')
  return { answer, finish: () => req.end('\r\n--b--\r\n') }
}

t.test('uploads beyond MAX_CONCURRENT_UPLOADS: 503 DROPCODE_BUSY with Retry-After; a freed slot is used again', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CONCURRENT_UPLOADS: '2' }))
  const [a, b] = [slowUpload(url), slowUpload(url)]
  await new Promise(resolve => setTimeout(resolve, 200))
  const refused = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': API_KEY }, body: (() => { const f = new FormData(); f.append('file', new Blob(['x']), 'x'); return f })() })
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('retry-after'), '2')
  t.match(await refused.json(), { code: 'DROPCODE_BUSY', retry_after: 2, error: String })
  a.finish()
  t.equal((await a.answer).status, 200)
  t.equal((await upload(url, [['file', { data: 'now there is room' }]])).status, 200, 'the freed slot is taken again')
  b.finish()
  t.equal((await b.answer).status, 200)
})

t.test('downloads beyond MAX_CONCURRENT_DOWNLOADS: 503 page; HEAD is not a transfer', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CONCURRENT_DOWNLOADS: '1' }))
  const code = (await upload(url, [['file', { data: Buffer.alloc(32 * 1024 * 1024, 7) }], ['max_downloads', '3']])).body.code as string
  const holding = await new Promise<http.IncomingMessage>(resolve => http.get(`${url}/download/${code}`, resolve)) // not read: holds its slot
  const second = await fetch(`${url}/download/${code}`)
  t.equal(second.status, 503)
  t.match(second.headers.get('content-type'), /^text\/html/)
  t.equal(second.headers.get('retry-after'), '2')
  await second.text()
  t.equal((await fetch(`${url}/download/${code}`, { method: 'HEAD' })).status, 200, 'HEAD still answered')
  holding.destroy()
  await new Promise(resolve => setTimeout(resolve, 100))
  const third = await fetch(`${url}/download/${code}`)
  t.equal(third.status, 200, 'slot free again once the first download ended')
  await third.arrayBuffer()
})

t.test('while the event loop lags, new requests are shed; health, readiness and metrics still answer', async t => {
  const { url, metricsUrl } = await startApp(t, testConfig(t, 'fs+local', {}, { SHED_EVENT_LOOP_DELAY_MS: '200' }))
  // Keep this process's event loop (the server's, in-process) lagging for 2.5 s, as a flood of
  // expensive work would: under-pressure looks at the mean delay over its sample window.
  const until = Date.now() + 2500
  const lag = setInterval(() => { const end = Date.now() + 300; while (Date.now() < end) { /* busy */ } if (Date.now() > until) clearInterval(lag) }, 10)
  await new Promise(resolve => setTimeout(resolve, 2000))
  const shed = await upload(url, [['file', { data: 'x' }]])
  t.equal(shed.status, 503)
  t.equal(shed.body.code, 'DROPCODE_BUSY')
  t.equal((await fetch(`${url}/healthz`)).status, 200, 'liveness is always answered')
  const ready = await fetch(`${url}/readyz`)
  t.equal(ready.status, 503)
  t.match(await ready.json(), { status: 'overloaded' })
  const scrape = await fetch(metricsUrl)
  t.equal(scrape.status, 200, 'metrics are scraped while the service sheds load')
  t.match(await scrape.text(), /dropcode_http_request_duration_seconds_count\{method="POST",route="\/upload",status="503"\} 1/)
})
