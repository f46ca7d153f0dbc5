/**
 * The optional rate limits: failed code lookups per client address (what stops code guessing)
 * and upload requests per API key. Counted in the state store, so they hold across instances.
 */
import assert from 'node:assert/strict'
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { API_KEY, eventually, startApp, testConfig, testEnv, upload } from '../helpers/app.js'
import { startRedisCluster, type TestRedisCluster } from '../helpers/redis-cluster.js'
import { startRedis } from '../helpers/redis-server.js'
import { pipelined } from '../helpers/pipeline.js'
import { startS3 } from '../helpers/s3.js'
import { startServer } from '../helpers/server-process.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
let started: TestRedisCluster | undefined
/** A Redis Cluster, started by the first test that needs it. */
async function cluster (): Promise<TestRedisCluster> {
  started ??= await startRedisCluster()
  return started
}
t.teardown(async () => { await started?.stop() })

t.test('on by default: 10 misses per minute per address, then 429', async t => {
  const env = testEnv(t, 'fs+local', {})
  delete env.RATE_LIMIT_FAILED_LOOKUPS
  const config = loadConfig(env)
  t.same(config.rateLimits, { windowMs: 60_000, failedLookups: 10, uploads: 0 })
  const { url } = await startApp(t, config)
  for (let i = 0; i < 10; i++) t.equal((await fetch(`${url}/download/AAAAA${i}`)).status, 404)
  t.equal((await fetch(`${url}/download/AAAAAZ`)).status, 429)
})

/** `n` well-formed codes that name no file, with `real` at position `at`. */
function burst (n: number, real: string, at: number): string[] {
  return Array.from({ length: n }, (_, i) => i === at ? real : `Zz${String(i).padStart(4, '0')}`)
}

const LIMIT = 10
const limited = { RATE_LIMIT_FAILED_LOOKUPS: String(LIMIT) }
const backendsOf = { 'fs+local': {}, 's3+redis': { redis, s3 } } as const

for (const pair of ['fs+local', 's3+redis'] as const) {
  t.test(`${pair}: 2,000 HEADs pipelined on one connection get the limit's misses; a real code in the burst is not found (guessing_limit_pipelined)`, async t => {
    const { url } = await startApp(t, testConfig(t, pair, backendsOf[pair], limited))
    const real = (await upload(url, [['file', { data: 'secret' }]])).body.code
    const codes = burst(2000, real, 1000)
    const statuses = await pipelined(url, 'HEAD', codes.map(c => `/download/${c}`))
    t.equal(statuses.length, 2000)
    t.equal(statuses.filter(s => s === 404).length, LIMIT, 'exactly the limit of misses answered')
    t.equal(statuses.filter(s => s === 429).length, 2000 - LIMIT, 'every other lookup refused')
    t.equal(statuses[1000], 429, 'the real code was never looked up')
  })

  t.test(`${pair}: 500 parallel DELETEs get the limit's misses; a real code in the burst is not deleted (guessing_limit_parallel)`, async t => {
    const { app, url } = await startApp(t, testConfig(t, pair, backendsOf[pair], limited))
    const real = (await upload(url, [['file', { data: 'secret' }]])).body.code
    const codes = burst(500, real, 250)
    // One connection each (fetch's pool opens as many as there are requests in flight).
    const statuses = await Promise.all(codes.map(async c => (await fetch(`${url}/delete/${c}`, { method: 'DELETE' })).status))
    t.equal(statuses.filter(s => s === 404).length, LIMIT, 'exactly the limit of misses answered')
    t.equal(statuses.filter(s => s === 429).length, 500 - LIMIT - (statuses[250] === 200 ? 1 : 0))
    t.equal(statuses[250], 429, 'the real code was not found')
    t.equal((await app.files.lookup(real)).code, real, 'and its file is still there')
  })
}

for (const setup of ['Redis', 'Redis Cluster'] as const) {
  t.test(`two instances sharing ${setup}: pipelined and parallel bursts at both get at most the limit + 1 misses (guessing_limit_across_instances)`, async t => {
    const backends = setup === 'Redis' ? { redis, s3 } : { redisSetup: await cluster(), s3 }
    const env = testEnv(t, 's3+redis', backends, limited)
    const a = await startApp(t, loadConfig(env))
    const b = await startApp(t, loadConfig(env))
    const real = (await upload(a.url, [['file', { data: 'secret' }]])).body.code
    const codes = burst(1000, real, 500)
    const [viaA, viaB, parallel] = await Promise.all([
      pipelined(a.url, 'HEAD', codes.map(c => `/download/${c}`)),
      pipelined(b.url, 'HEAD', codes.map(c => `/download/${c}`)),
      Promise.all(codes.slice(0, 200).map(async (c, i) => (await fetch(`${[a, b][i % 2]!.url}/download/${c}`, { method: 'HEAD' })).status))
    ])
    const all = [...viaA, ...viaB, ...parallel]
    const misses = all.filter(s => s === 404).length
    t.ok(misses >= LIMIT && misses <= LIMIT + 1, `${misses} misses answered for a limit of ${LIMIT} on two instances`)
    t.equal(all.filter(s => s === 200).length, 0, 'the real code was never found')
  })
}

t.test('failed lookups: over the limit, 429 with Retry-After, for download, HEAD and delete', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '3', RATE_LIMIT_WINDOW_SECONDS: '2' }))
  const good = await upload(url, [['file', { data: 'x' }]])
  t.equal((await fetch(`${url}/download/${good.body.code}`, { method: 'HEAD' })).status, 200, 'successes do not count')
  for (const code of ['AAAAAA', 'bad', 'BBBBBB']) t.equal((await fetch(`${url}/download/${code}`)).status, 404)
  const blocked = await fetch(`${url}/download/CCCCCC`)
  t.equal(blocked.status, 429)
  t.match(blocked.headers.get('content-type'), /^text\/html/)
  t.match(blocked.headers.get('retry-after'), /^[12]$/)
  t.equal((await fetch(`${url}/download/${good.body.code}`, { method: 'HEAD' })).status, 429, 'even a valid code: the address is blocked, not the code')
  const del = await fetch(`${url}/delete/DDDDDD`, { method: 'DELETE' })
  t.equal(del.status, 429)
  t.match(await del.json(), { code: 'DROPCODE_RATE_LIMITED', retry_after: Number })
  await new Promise(resolve => setTimeout(resolve, 2100))
  t.equal((await fetch(`${url}/download/${good.body.code}`)).status, 200, 'a new window')
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

t.test('X-Forwarded-For from a peer TRUST_PROXY does not cover: one warning per process, in the real log (untrusted_forwarding_warned)', async t => {
  const warnings = (logs: Array<Record<string, unknown>>) => logs.filter(l => /X-Forwarded-For/.test(String(l.msg)))
  const direct = await startServer(t, { ...testEnv(t, 'fs+local', {}), LOG_LEVEL: 'warn' })
  t.equal((await fetch(`${direct.url}/download/AAAAAA`, { method: 'HEAD' })).status, 404)
  t.same(warnings(direct.logs), [], 'no header, no warning')
  for (let i = 0; i < 3; i++) await fetch(`${direct.url}/download/AAAAAA`, { method: 'HEAD', headers: { 'x-forwarded-for': `198.51.100.${i}` } })
  await eventually(async () => { assert.equal(warnings(direct.logs).length, 1) })
  t.match(warnings(direct.logs)[0], { level: 40, peer: '127.0.0.1', msg: /TRUST_PROXY/ })
  const proxied = await startServer(t, { ...testEnv(t, 'fs+local', {}), LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1' })
  await fetch(`${proxied.url}/download/AAAAAA`, { method: 'HEAD', headers: { 'x-forwarded-for': '198.51.100.1' } })
  await fetch(`${proxied.url}/healthz`)
  // Lines arrive in order: once the last request's line is here, a warning would be too.
  await eventually(async () => { assert.ok(proxied.logs.some(l => JSON.stringify(l).includes('/healthz'))) })
  t.same(warnings(proxied.logs), [], 'a trusted proxy is not warned about')
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
  const { limitSubject } = await import('../../src/plugins/rate-limit.js')
  t.equal(limitSubject('203.0.113.9'), '203.0.113.9')
  t.equal(limitSubject('::ffff:203.0.113.9'), '203.0.113.9')
  t.equal(limitSubject('0:0:0:0:0:ffff:203.0.113.9'), '203.0.113.9', 'an IPv4-mapped address in its long spelling is IPv4 (rate_limit_mapped_ipv4_one_subnet)')
  t.equal(limitSubject('0:0:0:0:0:FFFF:cb00:7109'), '203.0.113.9', 'and in hex')
  t.equal(limitSubject('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(limitSubject('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64')
  t.equal(limitSubject('2001:db8::1'), '2001:db8:0:0::/64')
  t.equal(limitSubject('::1'), '0:0:0:0::/64')
})

t.test('an IPv4 address is its own subject in every spelling, whether or not it is parsed', async t => {
  const { limitSubject } = await import('../../src/plugins/rate-limit.js')
  const ipaddr = (await import('ipaddr.js')).default
  const octets = [0, 1, 9, 10, 99, 100, 199, 200, 249, 250, 255]
  const ips = octets.flatMap(a => [0, 255].map(b => `${a}.${b}.${octets[(a + b) % octets.length]}.${a}`))
  for (const ip of ips) t.equal(limitSubject(ip), ipaddr.parse(ip).toString(), ip)
  t.equal(limitSubject('010.0.0.1'), '8.0.0.1', 'a leading zero is octal to ipaddr.js: parsed, not taken as is')
  t.equal(limitSubject('256.1.1.1'), '256.1.1.1', 'not an address: as it came')
  t.equal(limitSubject('1.2.3.4\n'), '1.2.3.4\n')
})

t.test('behind a proxy, IPv4-mapped client addresses in long form do not share one limit (rate_limit_mapped_ipv4_one_subnet)', async t => {
  const { url } = await startApp(t, testConfig(t, 'fs+local', {}, { RATE_LIMIT_FAILED_LOOKUPS: '2', TRUST_PROXY: '127.0.0.1' }))
  const as = (ip: string) => ({ headers: { 'x-forwarded-for': ip } })
  for (let i = 0; i < 2; i++) await fetch(`${url}/download/HHHHH${i}`, as('0:0:0:0:0:ffff:198.51.100.1'))
  t.equal((await fetch(`${url}/download/HHHHH9`, as('0:0:0:0:0:ffff:198.51.100.1'))).status, 429, 'the guesser is limited')
  t.equal((await fetch(`${url}/download/HHHHH9`, as('0:0:0:0:0:ffff:198.51.100.2'))).status, 404, 'another IPv4 client is not')
  t.equal((await fetch(`${url}/download/HHHHH9`, as('198.51.100.1'))).status, 429, 'and the guesser in dotted form is the same subject')
})
