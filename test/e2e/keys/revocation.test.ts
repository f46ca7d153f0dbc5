/**
 * A revoked key is refused by every instance within a second, with no restart: measured with two
 * real processes on one embedded DATA_DIR (LMDB shared between processes) and two on one Redis.
 * One process revokes; the other is asked with the key every 20 ms until it answers 401.
 */
import t, { type Test } from 'tap'
import { dataDir, form } from '../../helpers/app.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startServer, type ServerProcess } from '../../helpers/server-process.js'

const ADMIN = 'revocation-admin-key-0123'
const redis = await startRedis()
t.teardown(() => redis.stop())

/** ms from the revocation's answer until `other` refuses the key (polled every 20 ms). */
async function revocationDelay (t: Test, one: ServerProcess, other: ServerProcess, name: string): Promise<number> {
  const made = await fetch(`${one.url}/admin/keys`, { method: 'POST', headers: { 'x-client-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ name }) })
  t.equal(made.status, 201)
  const { secret } = await made.json() as { secret: string }
  const tryUpload = async () => (await fetch(`${other.url}/upload`, { method: 'POST', headers: { 'x-client-key': secret }, body: form([['file', { data: 'x' }]]) })).status
  t.equal(await tryUpload(), 200, 'the other instance takes the key')
  t.equal(await tryUpload(), 200, 'and remembers it')
  const revoked = await fetch(`${one.url}/admin/keys/${name}`, { method: 'DELETE', headers: { 'x-client-key': ADMIN } })
  t.equal(revoked.status, 200)
  const at = Date.now()
  while (Date.now() - at < 5000) {
    const status = await tryUpload()
    if (status === 401) return Date.now() - at
    t.equal(status, 200)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  return Infinity
}

t.test('two processes on one embedded DATA_DIR: the other refuses a revoked key within 1 s', async t => {
  const env = { DATA_DIR: dataDir(t), API_KEYS: ADMIN }
  const [one, other] = [await startServer(t, env), await startServer(t, env)]
  const ms = await revocationDelay(t, one, other, 'embedded-key')
  t.comment(`refused ${ms} ms after the revocation`)
  t.ok(ms < 1000, `within 1 s (${ms} ms)`)
})

t.test('two processes on one Redis: the other refuses a revoked key within 1 s', async t => {
  const env = { API_KEYS: ADMIN, STATE_DRIVER: 'redis', REDIS_URL: redis.url, REDIS_PREFIX: 'revocation:' }
  const [one, other] = [await startServer(t, { ...env, DATA_DIR: dataDir(t) }), await startServer(t, { ...env, DATA_DIR: dataDir(t) })]
  const ms = await revocationDelay(t, one, other, 'redis-key')
  t.comment(`refused ${ms} ms after the revocation`)
  t.ok(ms < 1000, `within 1 s (${ms} ms)`)
})
