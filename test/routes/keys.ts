/**
 * API keys as data through real HTTP, run once per driver pair (fs-local.test.ts,
 * s3-redis.test.ts): the keys API, each limit of a key, the quota's accounting across two
 * instances, and where a key's name shows (never its secret).
 */
import type { Test } from 'tap'
import type { KeyAnswer, KeyListAnswer, KeySecretAnswer } from '../../src/api/answers.js'
import { loadConfig } from '../../src/config.js'
import { API_KEY, rawMultipart, startApp, testEnv, upload, type Backends, type DriverPair } from '../helpers/app.js'
import { post } from '../helpers/chunks.js'
import { listStored } from '../helpers/storage.js'

const HOUR = 3_600_000

/** Calls the keys API with `key` (the admin key by default). */
async function admin (url: string, method: string, path: string, body?: unknown, key = API_KEY) {
  const res = await fetch(`${url}/admin/keys${path}`, {
    method,
    headers: { 'x-client-key': key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  return { status: res.status, body: await res.json() as Record<string, unknown> }
}

const create = async (t: Test, url: string, body: Record<string, unknown>) => {
  const res = await admin(url, 'POST', '', body)
  t.equal(res.status, 201, `created ${String(body.name)}: ${JSON.stringify(res.body)}`)
  return res.body as unknown as KeySecretAnswer
}

const listed = async (url: string, name: string) =>
  ((await admin(url, 'GET', '')).body as unknown as KeyListAnswer).keys.find(k => k.name === name)

export function keysSuite (t: Test, pair: DriverPair, backends: Backends) {
  /** Two instances on one store (same environment), on a shared clock. */
  const twoInstances = async (t: Test, extra: Record<string, string> = {}) => {
    const clock = { now: Date.now() }
    const env = testEnv(t, pair, backends, extra)
    const a = await startApp(t, loadConfig(env), { now: () => clock.now })
    const b = await startApp(t, loadConfig(env), { now: () => clock.now })
    return { a, b, clock }
  }

  t.test('keys API: an admin key creates keys; a secret is shown once, opens uploads, and never appears again', async t => {
    const { a, b } = await twoInstances(t)
    const made = await create(t, a.url, { name: 'ci-main', max_file_size: 1000, quota_bytes: 10_000 })
    t.match(made, { name: 'ci-main', admin: false, source: 'store', limits: { max_file_size: 1000, quota_bytes: 10_000 }, expires_at: null, usage: { stored_bytes: 0, last_used_at: null } })
    t.match(made.secret, /^dck_[A-Za-z0-9_-]{43}$/)
    const whoami = await fetch(`${b.url}/key`, { headers: { 'x-client-key': made.secret } })
    t.same(await whoami.json(), { name: 'ci-main', admin: false }, 'GET /key: which key it is')
    t.equal((await fetch(`${b.url}/key`, { headers: { 'x-client-key': 'nonsense' } })).status, 401)
    const up = await upload(b.url, [['file', { data: 'from ci' }]], made.secret)
    t.equal(up.status, 200, 'the other instance takes the new key at once')
    const list = await admin(b.url, 'GET', '')
    t.equal(list.status, 200)
    t.notMatch(JSON.stringify(list.body), made.secret, 'the list never shows a secret')
    const entry = await listed(b.url, 'ci-main')
    t.match(entry, { usage: { stored_bytes: 7 } }, 'usage: the bytes of its live file')
    t.ok(Date.parse(entry!.usage.last_used_at!) > Date.now() - 60_000, 'and its last use')
    t.match((list.body as unknown as KeyListAnswer).keys.find(k => k.source === 'environment'), { admin: true, name: /^env-[0-9a-f]{12}$/ }, 'the API_KEYS key, by a name that tells nothing of it')

    t.match(await admin(a.url, 'POST', '', { name: 'ci-main' }), { status: 409, body: { code: 'DROPCODE_KEY_EXISTS' } })
    t.match(await admin(a.url, 'POST', '', { name: 'bad name' }), { status: 400, body: { code: 'DROPCODE_INVALID_FIELD' } })
    t.match(await admin(a.url, 'POST', '', { name: 'env-x' }), { status: 400, body: { code: 'DROPCODE_INVALID_FIELD' } }, 'env- is kept for API_KEYS')
    t.match(await admin(a.url, 'POST', '', { name: 'big', max_file_size: a.config.limits.maxFileSize + 1 }), { status: 400, body: { code: 'DROPCODE_INVALID_FIELD', limit: 'max_file_size', limit_of: 'service' } }, 'a key never lifts the service\'s limit')
    t.match(await admin(a.url, 'GET', '', undefined, made.secret), { status: 403, body: { code: 'DROPCODE_FORBIDDEN' } }, 'a plain key may not manage keys')
    t.match(await admin(a.url, 'GET', '', undefined, 'nonsense'), { status: 401, body: { code: 'DROPCODE_UNAUTHORIZED' } })
    const boss = await create(t, a.url, { name: 'ops', admin: true })
    t.equal((await admin(b.url, 'GET', '', undefined, boss.secret)).status, 200, 'a key created --admin may')
  })

  t.test('keys: revoked is refused at once; rotated keeps its sessions and files, both secrets work through the grace only', async t => {
    const { a, b, clock } = await twoInstances(t)
    const made = await create(t, a.url, { name: 'deploy' })
    const id = (await post(a.url, '/upload/start', [['filename', 'f'], ['total_chunks', '2']], undefined, made.secret)).body.upload_id!
    t.equal((await post(b.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '0']], Buffer.from('half '), made.secret)).status, 200)

    const rotated = await admin(a.url, 'POST', '/deploy/rotate', { grace_seconds: 60 })
    t.equal(rotated.status, 200)
    const fresh = (rotated.body as unknown as KeySecretAnswer).secret
    t.not(fresh, made.secret)
    t.equal(Date.parse((rotated.body as unknown as KeyAnswer).previous_secret_until!), clock.now + 60_000, 'the old secret\'s end')
    t.equal((await post(b.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '1']], Buffer.from('and half'), fresh)).status, 200, 'the session is the name\'s: the new secret continues it')
    t.equal((await post(a.url, '/upload/verify', [['upload_id', id]], undefined, made.secret)).status, 200, 'the old secret still works in its grace')
    clock.now += 61_000
    await new Promise(resolve => setTimeout(resolve, 600)) // past the instances' key caches
    t.equal((await post(a.url, '/upload/verify', [['upload_id', id]], undefined, made.secret)).status, 401, 'after the grace the old secret is refused')
    const done = await post(b.url, '/upload/complete', [['upload_id', id]], undefined, fresh)
    t.equal(done.status, 200)
    t.match(await listed(a.url, 'deploy'), { usage: { stored_bytes: 13 }, previous_secret_until: null }, 'the file counts for the name')

    t.match(await admin(b.url, 'DELETE', '/deploy'), { status: 200, body: { name: 'deploy', revoked: true } })
    t.equal((await upload(b.url, [['file', { data: 'x' }]], fresh)).status, 401, 'refused by the instance that revoked it, at once')
    await new Promise(resolve => setTimeout(resolve, 600))
    t.equal((await upload(a.url, [['file', { data: 'x' }]], fresh)).status, 401, 'and by the other within its cache\'s 500 ms')
    t.equal(await (await fetch(`${a.url}/download/${done.body.code}`)).text(), 'half and half', 'its files stay downloadable')
    t.match(await admin(a.url, 'DELETE', '/deploy'), { status: 404, body: { code: 'DROPCODE_KEY_NOT_FOUND' } })
    const env = ((await admin(a.url, 'GET', '')).body as unknown as KeyListAnswer).keys.find(k => k.source === 'environment')!
    t.match(await admin(a.url, 'DELETE', `/${env.name}`), { status: 404, body: { code: 'DROPCODE_KEY_NOT_FOUND' } }, 'API_KEYS keys are managed in the environment')

    const short = await create(t, a.url, { name: 'temp', expires_in_hours: 1 })
    t.equal((await upload(a.url, [['file', { data: 'x' }]], short.secret)).status, 200)
    clock.now += HOUR
    await new Promise(resolve => setTimeout(resolve, 600))
    t.equal((await upload(a.url, [['file', { data: 'x' }]], short.secret)).status, 401, 'an expired key is refused')
  })

  t.test('key limits: each refusal names its limit and stores nothing', async t => {
    const { a } = await twoInstances(t)
    const k = (await create(t, a.url, { name: 'small', max_file_size: 100, max_downloads: 3, max_expiry_hours: 2, max_open_sessions: 2, uploads_per_minute: 6 })).secret
    const big = await upload(a.url, [['file', { data: 'x'.repeat(101) }]], k)
    t.match(big, { status: 413, body: { code: 'DROPCODE_FILE_TOO_LARGE', limit: 'max_file_size', limit_value: 100, limit_of: 'small' } })
    t.match(big.body.error, /this API key \(small\)'s limit of 100 bytes/)
    t.match(await upload(a.url, [['file', { data: 'x' }], ['max_downloads', '4']], k), { status: 400, body: { code: 'DROPCODE_INVALID_FIELD', limit: 'max_downloads', limit_value: 3, limit_of: 'small' } })
    t.match(await upload(a.url, [['file', { data: 'x' }], ['expiry_hours', '3']], k), { status: 400, body: { code: 'DROPCODE_INVALID_FIELD', limit: 'max_expiry_hours', limit_value: 2 } })
    const starts = await Promise.all([1, 2, 3].map(() => post(a.url, '/upload/start', [['filename', 'f'], ['total_chunks', '1']], undefined, k)))
    t.same(starts.map(s => s.status).sort(), [200, 200, 403])
    t.match(starts.find(s => s.status === 403)!.body, { code: 'DROPCODE_TOO_MANY_SESSIONS', limit: 'max_open_sessions', limit_value: 2, limit_of: 'small' })
    const opened = starts.find(s => s.status === 200)!.body.upload_id!
    t.match((await post(a.url, '/upload/verify', [['upload_id', opened]], undefined, k)).body, { max_downloads: 1, expiry_hours: 2 }, 'absent settings default within the key\'s limits (24 hours would be over its 2)')
    // Six new uploads (three uploads and three starts) so far: the seventh is over the minute's limit.
    const rated = await upload(a.url, [['file', { data: 'x' }]], k)
    t.match(rated, { status: 429, body: { code: 'DROPCODE_RATE_LIMITED', limit: 'uploads_per_minute', limit_value: 6, limit_of: 'small' } })
    t.ok(Number(rated.headers.get('retry-after')) >= 1, 'with Retry-After')
    t.equal((await upload(a.url, [['file', { data: 'x' }]])).status, 200, 'other keys are not limited by it')
    const stored = await listStored(a.config)
    t.equal(stored.filter(s => !s.startsWith('unfinished:')).length, 1, 'only the other key\'s file stored (and on S3 the two sessions\' multipart uploads)')
  })

  t.test('quota: exact under 50 concurrent uploads across two instances; returned on delete, last download and expiry', async t => {
    const { a, b, clock } = await twoInstances(t)
    const file = 'q'.repeat(10_000)
    const k = (await create(t, a.url, { name: 'team', quota_bytes: 100_000 })).secret
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => upload(i % 2 === 0 ? a.url : b.url, [['file', { data: file }], ['max_downloads', '1']], k)))
    const ok = answers.filter(r => r.status === 200)
    const refused = answers.filter(r => r.status !== 200)
    t.ok(ok.length >= 1 && ok.length <= 10, `${ok.length} stored`)
    t.ok(refused.every(r => r.status === 403 && r.body.code === 'DROPCODE_QUOTA_EXCEEDED' && r.body.limit === 'quota_bytes' && r.body.limit_value === 100_000 && r.body.limit_of === 'team'), [...new Set(refused.map(r => `${r.status} ${r.body.code}`))].join())
    const usage = async () => (await listed(a.url, 'team'))!.usage.stored_bytes
    t.equal(await usage(), ok.length * 10_000, 'the ledger holds exactly the stored files: nothing of the refused or of the reservations')
    t.ok(await usage() <= 100_000, 'never above the quota')

    // Fill up to the quota, one at a time (each reserves its request's length, a little more than the file).
    while ((await usage()) + 10_000 <= 100_000 - 1024) {
      const up = await upload(a.url, [['file', { data: file }], ['max_downloads', '1']], k)
      if (up.status !== 200) break
      ok.push(up)
    }
    const full = await upload(b.url, [['file', { data: file }]], k)
    t.match(full, { status: 403, body: { code: 'DROPCODE_QUOTA_EXCEEDED', stored_bytes: ok.length * 10_000 } })
    t.match(full.body.error, /this API key \(team\) holds \d+ of its quota of 100000 bytes/)
    const before = await usage()
    t.equal((await fetch(`${a.url}/delete/${ok[0]!.body.code}`, { method: 'DELETE' })).status, 200)
    t.equal(await usage(), before - 10_000, 'a deleted file returns its bytes')
    await (await fetch(`${b.url}/download/${ok[1]!.body.code}`)).arrayBuffer()
    t.equal(await usage(), before - 20_000, 'so does a file downloaded for the last time')
    clock.now += 25 * HOUR
    t.equal(await usage(), 0, 'and every file at its expiry')
    t.equal((await upload(a.url, [['file', { data: file }]], k)).status, 200, 'room again')
  })

  t.test('quota: chunks count while their session is open, and become the file\'s; a refused upload sends nothing', async t => {
    const { a, b } = await twoInstances(t)
    const k = (await create(t, a.url, { name: 'chunky', quota_bytes: 3000 })).secret
    const id = (await post(a.url, '/upload/start', [['filename', 'f'], ['total_chunks', '3']], undefined, k)).body.upload_id!
    t.equal((await post(a.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '0']], Buffer.alloc(1000, 1), k)).status, 200)
    t.equal((await post(b.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '0']], Buffer.alloc(900, 2), k)).status, 200, 'a re-sent chunk replaces the first')
    t.match(await listed(a.url, 'chunky'), { usage: { stored_bytes: 900 } }, 'the open session\'s received bytes')
    t.equal((await post(b.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '1']], Buffer.alloc(1000, 3), k)).status, 200)
    const over = await post(a.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '2']], Buffer.alloc(1500, 4), k)
    t.match(over, { status: 403, body: { code: 'DROPCODE_QUOTA_EXCEEDED' } })
    t.equal((await post(a.url, '/upload/chunk', [['upload_id', id], ['chunk_index', '2']], Buffer.alloc(500, 4), k)).status, 200)
    const done = await post(b.url, '/upload/complete', [['upload_id', id]], undefined, k)
    t.equal(done.status, 200)
    t.match(await listed(a.url, 'chunky'), { usage: { stored_bytes: 2400 } }, 'the session\'s bytes became the file\'s')

    // Refused by its declared length, before its body is read.
    const { body, contentType } = rawMultipart([{ name: 'file', filename: 'big.bin', data: Buffer.alloc(1000) }])
    const res = await fetch(`${a.url}/upload`, { method: 'POST', headers: { 'x-client-key': k, 'content-type': contentType }, body })
    t.equal(res.status, 403)
    t.equal(((await listStored(a.config)).filter(s => !s.includes('unfinished'))).length, 1, 'nothing more stored: only the completed file')
  })

  t.test('the key\'s name, never its secret, is in the log lines, the metrics and the file\'s record', async t => {
    const lines: string[] = []
    const { Writable } = await import('node:stream')
    const { default: pino } = await import('pino')
    const logger = pino({ level: 'info' }, new Writable({ write (chunk, _enc, done) { lines.push(String(chunk)); done() } }))
    const env = testEnv(t, pair, backends, { LOG_LEVEL: 'info' })
    const a = await startApp(t, loadConfig(env), { loggerInstance: logger })
    const made = await create(t, a.url, { name: 'pipeline-7', max_file_size: 10 })
    const up = await upload(a.url, [['file', { data: 'logged' }]], made.secret)
    t.equal(up.status, 200)
    t.equal((await upload(a.url, [['file', { data: 'x'.repeat(11) }]], made.secret)).status, 413)
    const uploaded = lines.map(l => JSON.parse(l) as Record<string, unknown>).find(l => l.msg === 'file uploaded')
    t.match(uploaded, { key: 'pipeline-7' }, 'the upload\'s log line names the key')
    t.notOk(lines.join('\n').includes(made.secret), 'no log line holds the secret')
    const metrics = await (await fetch(a.metricsUrl)).text()
    t.match(metrics, /^dropcode_key_uploads_total\{key="pipeline-7"\} 1$/m)
    t.match(metrics, /^dropcode_key_refusals_total\{key="pipeline-7",limit="max_file_size"\} 1$/m)
    t.notOk(metrics.includes(made.secret))
    const record = await a.app.state.files.lookup(up.body.code, Date.now())
    t.match(record, { ok: true, file: { keyName: 'pipeline-7' } }, 'the record says which key uploaded it')
  })
}
