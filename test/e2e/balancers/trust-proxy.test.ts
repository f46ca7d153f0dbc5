/**
 * TRUST_PROXY behind the real balancers (deploy/nginx.conf, deploy/haproxy.cfg), with clients on
 * addresses of their own (127.0.0.2, 127.0.0.3 …; the balancer is 127.0.0.1) and a small
 * guessing limit (issue 22). nginx appends the peer to the client's X-Forwarded-For, HAProxy
 * adds a header line of its own: with a hop count (`1`) or the balancer's address
 * (`127.0.0.1`), a guesser who sends a fresh X-Forwarded-For with every lookup is still
 * counted as itself and refused once over the limit, while another client downloads as usual.
 *
 * The pitfalls are pinned as what they are: a range that includes the clients
 * (`127.0.0.0/8` here, `10.0.0.0/8` on a network where clients live in 10/8) trusts whatever
 * a client writes, and so does a hop count on an instance that clients reach directly.
 */
import http from 'node:http'
import t, { type Test } from 'tap'
import { API_KEY, upload } from '../../helpers/app.js'
import type { BalancerKind } from '../../helpers/balancers.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { until } from '../../helpers/until.js'
import { behindBalancer, type Setup } from './recipes.js'
import { logged as lineLogged } from '../../helpers/server-process.js'

/** RATE_LIMIT_FAILED_LOOKUPS in these tests. */
const LIMIT = 3
/** Lookups a guesser makes: well past the limit. */
const GUESSES = 12
const [GUESSER, OTHER, DIRECT] = ['127.0.0.2', '127.0.0.3', '127.0.0.4']

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** One request on a connection of its own from the loopback address `from`. */
async function request (url: string, from: string, headers: Record<string, string> = {}): Promise<number> {
  return await new Promise((resolve, reject) => {
    http.request(url, { localAddress: from, headers, agent: false }, res => {
      res.resume().on('end', () => resolve(res.statusCode!))
    }).on('error', reject).end()
  })
}

let spoofs = 0
/** A different made-up client address for every request. */
const spoofed = () => ({ 'x-forwarded-for': `203.0.113.${++spoofs % 250}` })
const missingCode = () => `Zq${String(Math.floor(Math.random() * 1e4)).padStart(4, '0')}`

/** GUESSES lookups of missing codes, one after another, each with a fresh X-Forwarded-For. */
async function guess (url: string, from: string): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < GUESSES; i++) statuses.push(await request(`${url}/download/${missingCode()}`, from, spoofed()))
  return statuses
}

const count = (statuses: number[], status: number) => statuses.filter(s => s === status).length

/** The statuses are those of one limited address: misses up to the limit, then only 429. */
function limited (t: Test, statuses: number[], what: string): void {
  const misses = count(statuses, 404)
  // Up to LIMIT + instances − 1 misses (README: "Guessing codes"); one at a time, LIMIT.
  t.ok(misses >= LIMIT && misses <= LIMIT + 1, `${what}: ${misses} misses answered with a limit of ${LIMIT} (${statuses.join(' ')})`)
  t.same(statuses.slice(statuses.indexOf(429)).filter(s => s !== 429), [], `${what}: every lookup after the first 429 is 429`)
  t.equal(count(statuses, 429), GUESSES - misses, `${what}: ${GUESSES - misses} of ${GUESSES} refused`)
}

/** Request log lines of `setup`'s instances for lookups from `ip` (a RegExp: any it matches). */
const lookupsLogged = (setup: Setup, ip: string | RegExp) => setup.instances.flatMap(s => s.logs)
  .filter(l => l.route === '/download/:code' && typeof l.ip === 'string' && (typeof ip === 'string' ? l.ip === ip : ip.test(l.ip))).length
const MADE_UP = /^203\.0\.113\./

/** Waits (up to 5 s) for `n` such lines: a log line is read from the instance after its answer. */
async function logged (setup: Setup, ip: string | RegExp, n: number): Promise<number> {
  await until(() => lookupsLogged(setup, ip) >= n, 5000).catch(() => {})
  return lookupsLogged(setup, ip)
}

async function sharedFile (setup: Setup): Promise<string> {
  const up = await upload(setup.lb.url, [['file', { data: 'for the other client' }], ['max_downloads', '100']], API_KEY)
  return up.body.code
}

for (const kind of ['nginx', 'haproxy'] as BalancerKind[]) {
  for (const trust of ['1', '127.0.0.1']) {
    t.test(`${kind}, TRUST_PROXY=${trust}: a guesser sending a fresh X-Forwarded-For with every lookup is limited as itself; another client downloads meanwhile`, async t => {
      const setup = await behindBalancer(t, kind, { redis, s3 }, { TRUST_PROXY: trust, RATE_LIMIT_FAILED_LOOKUPS: String(LIMIT) })
      const code = await sharedFile(setup)
      const url = `${setup.lb.url}/download/${code}`

      const [statuses, meanwhile] = await Promise.all([
        guess(setup.lb.url, GUESSER),
        Promise.all(Array.from({ length: 4 }, () => request(url, OTHER)))
      ])
      limited(t, statuses, `guesser ${GUESSER} through ${kind}`)
      t.same(meanwhile, [200, 200, 200, 200], `${OTHER}'s downloads during the guessing answer 200`)
      t.equal(await request(url, OTHER, spoofed()), 200, `${OTHER}'s download after it answers 200`)
      t.equal(await request(`${setup.lb.url}/download/${missingCode()}`, OTHER), 404, `${OTHER} has its own count: a miss is 404, not 429`)
      t.equal(await request(url, GUESSER, spoofed()), 429, 'the guesser\'s own download of a real code is 429 too: no header buys a fresh count')
      t.equal(await logged(setup, GUESSER, GUESSES + 1), GUESSES + 1, `the instances logged every lookup of the guesser as ${GUESSER}`)
      t.equal(lookupsLogged(setup, MADE_UP), 0, 'and none as a made-up address')

      // Straight to an instance, past the balancer, with the same made-up headers.
      const direct = await guess(setup.instances[0].url, DIRECT)
      if (trust === '1') {
        t.equal(count(direct, 404), GUESSES, `pitfall: TRUST_PROXY=1 on an instance clients reach directly lets them choose their address (${GUESSES} misses of ${GUESSES}, none refused)`)
        t.equal(await logged(setup, MADE_UP, GUESSES), GUESSES, 'its lookups were counted against the made-up addresses')
        t.equal(lookupsLogged(setup, DIRECT), 0)
      } else {
        limited(t, direct, `client ${DIRECT} straight to an instance`)
        t.ok(await lineLogged(setup.instances[0], l => typeof l.msg === 'string' && l.msg.includes('TRUST_PROXY does not cover')), 'the instance warns about X-Forwarded-For from a peer TRUST_PROXY does not name')
      }
    })
  }
}

t.test('nginx, TRUST_PROXY=127.0.0.0/8 (pitfall): a range that includes the clients trusts what they write, so a spoofing guesser is never limited', async t => {
  const setup = await behindBalancer(t, 'nginx', { redis, s3 }, { TRUST_PROXY: '127.0.0.0/8', RATE_LIMIT_FAILED_LOOKUPS: String(LIMIT) })
  const statuses = await guess(setup.lb.url, GUESSER)
  t.equal(count(statuses, 404), GUESSES, `${GUESSES} misses of ${GUESSES} answered with a limit of ${LIMIT}: each lookup counted against its made-up address`)
  t.equal(await logged(setup, MADE_UP, GUESSES), GUESSES, `each logged as its made-up address, none as ${GUESSER}`)
  t.equal(lookupsLogged(setup, GUESSER), 0)
  // The same guesser without the header is itself again: the range, not the limit, is at fault.
  const plain: number[] = []
  for (let i = 0; i < GUESSES; i++) plain.push(await request(`${setup.lb.url}/download/${missingCode()}`, GUESSER))
  limited(t, plain, `guesser ${GUESSER} without X-Forwarded-For`)
})
