/**
 * Overload: transfers beyond the per-instance limits or beyond a key's or an address's share of
 * them, and requests arriving while the event loop lags, are refused with 503 DROPCODE_BUSY and Retry-After, never queued into an OOM;
 * health, readiness and metrics (their own listener) stay answered.
 */
import http from 'node:http'
import t from 'tap'
import { API_KEY, startApp, testConfig, upload } from '../helpers/app.js'

/** Starts an upload whose body trickles in until `finish()` is called. */
function slowUpload (url: string, key = API_KEY, headers: Record<string, string> = {}) {
  const req = http.request(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': key, 'content-type': 'multipart/form-data; boundary=b', 'transfer-encoding': 'chunked', ...headers } })
  const answer = new Promise<{ status: number, body: string }>((resolve, reject) => {
    req.on('response', res => { let body = ''; res.setEncoding('utf8').on('data', c => { body += c }).on('end', () => resolve({ status: res.statusCode!, body })) }).on('error', reject)
  })
  req.write('--b\r\ncontent-disposition: form-data; name="file"; filename="slow"\r\n\r\nsome bytes')
  return { answer, finish: () => req.end('\r\n--b--\r\n') }
}

const OTHER_KEY = 'other-key-0123456789'
const metric = async (metricsUrl: string, line: RegExp) => (await (await fetch(metricsUrl)).text()).match(line)?.[1]

t.test('upload slots: a key takes one only while it holds fewer than are free; beyond, 503 DROPCODE_BUSY with Retry-After; other keys still get in', async t => {
  const { url, metricsUrl } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CONCURRENT_UPLOADS: '3', API_KEYS: `${API_KEY},${OTHER_KEY}` }))
  const [a1, a2] = [slowUpload(url), slowUpload(url)] // 0 < 3 free, then 1 < 2 free
  await new Promise(resolve => setTimeout(resolve, 200))
  const refused = await upload(url, [['file', { data: 'x' }]])
  t.equal(refused.status, 503, 'the key holds 2 of 3 with 1 free: its share is taken')
  t.match(refused.body, { code: 'DROPCODE_BUSY', retry_after: 2, error: /API key holds as many uploads as are left free/ })
  const b = slowUpload(url, OTHER_KEY)
  await new Promise(resolve => setTimeout(resolve, 200))
  const full = await upload(url, [['file', { data: 'x' }]], OTHER_KEY)
  t.equal(full.status, 503)
  t.match(full.body.error, /3 uploads are running/)
  t.equal(await metric(metricsUrl, /^dropcode_transfer_slots\{kind="upload",state="used"\} (\d+)$/m), '3')
  t.equal(await metric(metricsUrl, /^dropcode_transfer_subjects\{kind="upload"\} (\d+)$/m), '2')
  t.equal(await metric(metricsUrl, /^dropcode_transfer_largest_holding\{kind="upload"\} (\d+)$/m), '2')
  t.equal(await metric(metricsUrl, /^dropcode_transfer_refusals_total\{kind="upload",reason="share"\} (\d+)$/m), '1')
  t.equal(await metric(metricsUrl, /^dropcode_transfer_refusals_total\{kind="upload",reason="full"\} (\d+)$/m), '1')
  a1.finish()
  b.finish()
  t.equal((await a1.answer).status, 200)
  t.equal((await b.answer).status, 200)
  t.equal((await upload(url, [['file', { data: 'now there is room' }]], OTHER_KEY)).status, 200, 'the freed slots are taken again')
  a2.finish()
  t.equal((await a2.answer).status, 200)
  t.equal(await metric(metricsUrl, /^dropcode_transfer_slots\{kind="upload",state="used"\} (\d+)$/m), '0')
})

t.test('download slots are shared per client address: readers that stop reading lock out neither other addresses nor HEAD', async t => {
  // TRUST_PROXY names the test client, so X-Forwarded-For gives each request its address.
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { MAX_CONCURRENT_DOWNLOADS: '3', TRUST_PROXY: '127.0.0.1' }))
  const code = (await upload(url, [['file', { data: Buffer.alloc(32 * 1024 * 1024, 7) }], ['max_downloads', '5']])).body.code
  const from = (ip: string) => ({ 'x-forwarded-for': ip })
  const hold = async (ip: string) => await new Promise<http.IncomingMessage>(resolve => http.get(`${url}/download/${code}`, { headers: from(ip) }, resolve)) // not read: holds its slot
  const holding = [await hold('203.0.113.7'), await hold('203.0.113.7')]
  const second = await fetch(`${url}/download/${code}`, { headers: from('203.0.113.7') })
  t.equal(second.status, 503, 'the address holds 2 with 1 free')
  t.match(second.headers.get('content-type'), /^text\/html/)
  t.equal(second.headers.get('retry-after'), '2')
  await second.text()
  t.equal((await fetch(`${url}/download/${code}`, { method: 'HEAD', headers: from('203.0.113.7') })).status, 200, 'HEAD still answered')
  const other = await fetch(`${url}/download/${code}`, { headers: from('198.51.100.9') })
  t.equal(other.status, 200, 'another address gets the free slot')
  t.equal((await other.arrayBuffer()).byteLength, 32 * 1024 * 1024)
  for (const h of holding) h.destroy()
  await new Promise(resolve => setTimeout(resolve, 100))
  const third = await fetch(`${url}/download/${code}`, { headers: from('203.0.113.7') })
  t.equal(third.status, 200, 'slots free again once the held downloads ended')
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
  t.equal((await fetch(`${url}/openapi.json`)).status, 200, 'so is the OpenAPI document (config.alwaysAnswered)')
  t.equal((await fetch(`${url}/limits`)).status, 503, 'the other routes are shed')
  const ready = await fetch(`${url}/readyz`)
  t.equal(ready.status, 503)
  t.match(await ready.json(), { status: 'overloaded' })
  const scrape = await fetch(metricsUrl)
  t.equal(scrape.status, 200, 'metrics are scraped while the service sheds load')
  t.match(await scrape.text(), /dropcode_http_request_duration_seconds_count\{method="POST",route="\/upload",status="503",end="complete"\} 1/)
})
