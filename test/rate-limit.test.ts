/**
 * The optional rate limits: failed code lookups per client address (what stops code guessing)
 * and upload requests per API key. Counted in the state store, so they hold across instances.
 */
import t from 'tap'
import { loadConfig } from '../src/config.js'
import { API_KEY, startApp, testConfig, testEnv, upload } from './helpers/app.js'
import { startRedis } from './helpers/redis-server.js'
import { startS3 } from './helpers/s3.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

t.test('off by default: any number of misses is 404', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}))
  for (let i = 0; i < 30; i++) t.equal((await fetch(`${url}/download/AAAAA${i % 10}`)).status, 404)
})

t.test('failed lookups: over the limit, 429 with Retry-After, for download, HEAD and delete', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '3', RATE_LIMIT_WINDOW_SECONDS: '2' }))
  const good = await upload(url, [['file', { data: 'x' }]])
  t.equal((await fetch(`${url}/download/${good.body.code as string}`, { method: 'HEAD' })).status, 200, 'successes do not count')
  for (const code of ['AAAAAA', 'bad', 'BBBBBB']) t.equal((await fetch(`${url}/download/${code}`)).status, 404)
  const blocked = await fetch(`${url}/download/CCCCCC`)
  t.equal(blocked.status, 429)
  t.match(blocked.headers.get('content-type'), /^text\/html/)
  t.match(blocked.headers.get('retry-after'), /^[12]$/)
  t.equal((await fetch(`${url}/download/${good.body.code as string}`, { method: 'HEAD' })).status, 429, 'even a valid code: the address is blocked, not the code')
  const del = await fetch(`${url}/delete/DDDDDD`, { method: 'DELETE' })
  t.equal(del.status, 429)
  t.match(await del.json(), { code: 'DROPCODE_RATE_LIMITED', retry_after: Number })
  await new Promise(resolve => setTimeout(resolve, 2100))
  t.equal((await fetch(`${url}/download/${good.body.code as string}`)).status, 200, 'a new window')
})

t.test('client addresses come from TRUST_PROXY only: X-Forwarded-For cannot dodge the limit', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '2' }))
  for (let i = 0; i < 2; i++) await fetch(`${url}/download/EEEEE${i}`, { headers: { 'x-forwarded-for': `198.51.100.${i}` } })
  t.equal((await fetch(`${url}/download/EEEEE9`, { headers: { 'x-forwarded-for': '198.51.100.77' } })).status, 429)
  const proxied = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '2', TRUST_PROXY: '127.0.0.1' }))
  for (let i = 0; i < 2; i++) await fetch(`${proxied.url}/download/FFFFF${i}`, { headers: { 'x-forwarded-for': '198.51.100.1' } })
  t.equal((await fetch(`${proxied.url}/download/FFFFF9`, { headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 429, 'the client behind the proxy is limited')
  t.equal((await fetch(`${proxied.url}/download/FFFFF9`, { headers: { 'x-forwarded-for': '198.51.100.2' } })).status, 404, 'another client behind the proxy is not')
})

t.test('uploads per API key', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_UPLOADS: '2', API_KEYS: `${API_KEY},second-key-123` }))
  t.equal((await upload(url, [['file', { data: 'x' }]])).status, 200)
  t.equal((await upload(url, [['file', { data: 'x' }]])).status, 200)
  const third = await upload(url, [['file', { data: 'x' }]])
  t.equal(third.status, 429)
  t.equal(third.body.code, 'DROPCODE_RATE_LIMITED')
  t.ok(Number(third.headers.get('retry-after')) >= 1)
  t.equal((await upload(url, [['file', { data: 'x' }]], 'second-key-123')).status, 200, 'other keys are not affected')
  t.equal((await upload(url, [['file', { data: 'x' }]], 'wrong')).status, 401, 'authentication comes first')
})

t.test('limits hold across instances sharing Redis', async t => {
  const env = testEnv(t, 's3+redis', { redis, s3 }, { RATE_LIMIT_FAILED_LOOKUPS: '4' })
  const a = await startApp(t, loadConfig(env))
  const b = await startApp(t, loadConfig(env))
  for (let i = 0; i < 4; i++) t.equal((await fetch(`${(i % 2 === 0 ? a : b).url}/download/GGGGG${i}`)).status, 404)
  t.equal((await fetch(`${a.url}/download/GGGGG8`)).status, 429)
  t.equal((await fetch(`${b.url}/download/GGGGG9`)).status, 429)
})

t.test('IPv6 clients are counted per /64; IPv4-mapped addresses as IPv4', async t => {
  const { limitSubject } = await import('../src/plugins/rate-limit.js')
  t.equal(limitSubject('203.0.113.9'), '203.0.113.9')
  t.equal(limitSubject('::ffff:203.0.113.9'), '203.0.113.9')
  t.equal(limitSubject('0:0:0:0:0:ffff:203.0.113.9'), '203.0.113.9', 'an IPv4-mapped address in its long spelling is IPv4 (rate_limit_mapped_ipv4_one_subnet)')
  t.equal(limitSubject('0:0:0:0:0:FFFF:cb00:7109'), '203.0.113.9', 'and in hex')
  t.equal(limitSubject('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(limitSubject('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64')
  t.equal(limitSubject('2001:db8::1'), '2001:db8:0:0::/64')
  t.equal(limitSubject('::1'), '0:0:0:0::/64')
})

t.test('behind a proxy, IPv4-mapped client addresses in long form do not share one limit (rate_limit_mapped_ipv4_one_subnet)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '2', TRUST_PROXY: '127.0.0.1' }))
  const as = (ip: string) => ({ headers: { 'x-forwarded-for': ip } })
  for (let i = 0; i < 2; i++) await fetch(`${url}/download/HHHHH${i}`, as('0:0:0:0:0:ffff:198.51.100.1'))
  t.equal((await fetch(`${url}/download/HHHHH9`, as('0:0:0:0:0:ffff:198.51.100.1'))).status, 429, 'the guesser is limited')
  t.equal((await fetch(`${url}/download/HHHHH9`, as('0:0:0:0:0:ffff:198.51.100.2'))).status, 404, 'another IPv4 client is not')
  t.equal((await fetch(`${url}/download/HHHHH9`, as('198.51.100.1'))).status, 429, 'and the guesser in dotted form is the same subject')
})
