/**
 * `dropcode keys` (src/cli/keys.ts) against a stub of the admin API: what is sent, how each
 * refusal is worded and which exit code it gets, and a create whose first answer is lost. (The
 * real service's admin API is tested end to end elsewhere.)
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import type { KeyAnswer, KeySecretAnswer } from '../../src/api/answers.js'
import { parse, type KeysArgs } from '../../src/cli/args.js'
import { CliError, EXIT } from '../../src/cli/exit-codes.js'
import { Client } from '../../src/cli/http.js'
import { keysTable } from '../../src/cli/keys-table.js'
import { createKey, listKeys, revokeKey, rotateKey, rotatedNote } from '../../src/cli/keys.js'
import { VERSION_HEADER } from '../../src/api/answers.js'

interface Seen { method: string, url: string, key: string | undefined, type: string | undefined, body: string }
type Handler = (seen: Seen, n: number, req: http.IncomingMessage, res: http.ServerResponse) => void

async function stub (t: Test, handle: Handler) {
  const seen: Seen[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => { body += c })
    req.on('end', () => {
      const s = { method: req.method!, url: req.url!, key: req.headers['x-client-key'] as string | undefined, type: req.headers['content-type'], body }
      seen.push(s)
      handle(s, seen.length, req, res)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

const answer = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json', [VERSION_HEADER]: '0.1.0' })
  res.end(JSON.stringify(body))
}
const error = (res: http.ServerResponse, status: number, code: string) => answer(res, status, { code, error: `the service's text for ${code}` })

const key = (name: string, extra: Partial<KeyAnswer> = {}): KeyAnswer => ({
  name, admin: false, source: 'store', created_at: '2026-11-28T07:00:00.000Z', expires_at: null, limits: {}, previous_secret_until: null, usage: { stored_bytes: 0, last_used_at: null }, ...extra
})

function setup (t: Test, url: string, argv: string[]) {
  const args = parse(['keys', ...argv, '--url', url, '--key', 'admin-secret', '--retries', '2'], {}) as KeysArgs
  const client = new Client({ url: args.url, key: args.key, retries: args.retries, sockets: 2 })
  t.teardown(() => client.close())
  return { args, client }
}

async function failure (p: Promise<unknown>): Promise<CliError> {
  try {
    await p
  } catch (err) {
    if (err instanceof CliError) return err
    throw err
  }
  throw new Error('it succeeded')
}

t.test('create: a JSON body with the admin key; the answer with its secret', async t => {
  const secret: KeySecretAnswer = { ...key('ci', { limits: { quota_bytes: 1024 ** 3 } }), secret: 'dck_new' }
  const server = await stub(t, (_s, _n, _req, res) => answer(res, 201, secret))
  const { args, client } = setup(t, server.url, ['create', '--name', 'ci', '--quota', '1G'])
  t.same(await createKey(args as Extract<KeysArgs, { action: 'create' }>, client), secret)
  t.equal(server.seen.length, 1)
  t.match(server.seen[0], { method: 'POST', url: '/admin/keys', key: 'admin-secret', type: 'application/json' })
  t.same(JSON.parse(server.seen[0]!.body), { name: 'ci', quota_bytes: 1024 ** 3 })
})

t.test('create: an answer lost on the way, then 409: says the first attempt may have made the key', async t => {
  const server = await stub(t, (_s, n, req, res) => {
    if (n === 1) req.socket.destroy() // created, and the answer with the secret is lost
    else error(res, 409, 'DROPCODE_KEY_EXISTS')
  })
  const { args, client } = setup(t, server.url, ['create', '--name', 'ci'])
  const err = await failure(createKey(args as Extract<KeysArgs, { action: 'create' }>, client))
  t.equal(err.exitCode, EXIT.REFUSED)
  t.match(err.message, 'the key may have been created by the first attempt')
  t.match(err.message, 'revoke and create it again, or rotate it, to get a secret')
  t.equal(server.seen.length, 2, 'the 409 is not retried')
})

t.test('create: 409 at once says the name is taken; 403 says an admin key is needed', async t => {
  let status = 409
  const server = await stub(t, (_s, _n, _req, res) => error(res, status, status === 409 ? 'DROPCODE_KEY_EXISTS' : 'DROPCODE_FORBIDDEN'))
  const { args, client } = setup(t, server.url, ['create', '--name', 'ci'])
  const exists = await failure(createKey(args as Extract<KeysArgs, { action: 'create' }>, client))
  t.equal(exists.exitCode, EXIT.REFUSED)
  t.match(exists.message, /^a key named ci exists already/)
  t.notMatch(exists.message, 'first attempt')
  status = 403
  const forbidden = await failure(createKey(args as Extract<KeysArgs, { action: 'create' }>, client))
  t.equal(forbidden.exitCode, EXIT.REFUSED)
  t.match(forbidden.message, 'no admin key, and managing keys takes one')
  t.equal(server.seen.length, 2, 'neither is retried')
})

t.test('revoke: 404 names the key store and API_KEYS (exit 4); 401 is exit 3', async t => {
  let status = 404
  const server = await stub(t, (_s, _n, _req, res) => error(res, status, status === 404 ? 'DROPCODE_KEY_NOT_FOUND' : 'DROPCODE_UNAUTHORIZED'))
  const { args, client } = setup(t, server.url, ['revoke', 'env.key'])
  const missing = await failure(revokeKey(args as Extract<KeysArgs, { action: 'revoke' }>, client))
  t.equal(missing.exitCode, EXIT.NOT_FOUND)
  t.equal(missing.message, 'no key named env.key in the key store; keys from API_KEYS are managed in the server\'s environment (404 DROPCODE_KEY_NOT_FOUND)')
  t.match(server.seen[0], { method: 'DELETE', url: '/admin/keys/env.key', key: 'admin-secret' })
  status = 401
  t.equal((await failure(revokeKey(args as Extract<KeysArgs, { action: 'revoke' }>, client))).exitCode, EXIT.AUTH)
})

t.test('a service without the keys API: its route 404 is not "no such key"', async t => {
  const server = await stub(t, (_s, _n, _req, res) => error(res, 404, 'DROPCODE_ROUTE_NOT_FOUND'))
  const { args, client } = setup(t, server.url, ['list'])
  const err = await failure(listKeys(args, client))
  t.equal(err.exitCode, EXIT.REFUSED)
  t.match(err.message, 'the service has no keys API')
})

t.test('rotate: grace_seconds sent; the note says until when the old secret works', async t => {
  const rotated: KeySecretAnswer = { ...key('ci', { previous_secret_until: '2026-11-28T08:30:00.000Z' }), secret: 'dck_rotated' }
  const server = await stub(t, (_s, _n, _req, res) => answer(res, 200, rotated))
  const { args, client } = setup(t, server.url, ['rotate', 'ci', '--grace', '10m'])
  const result = await rotateKey(args as Extract<KeysArgs, { action: 'rotate' }>, client)
  t.same(result, { answer: rotated, repeated: false })
  t.match(server.seen[0], { method: 'POST', url: '/admin/keys/ci/rotate', type: 'application/json' })
  t.same(JSON.parse(server.seen[0]!.body), { grace_seconds: 600 })
  t.equal(rotatedNote(result), 'new secret of key ci, shown this once; the previous secret works until 2026-11-28 08:30 UTC')
  t.match(rotatedNote({ answer: { ...rotated, previous_secret_until: null }, repeated: true }), /the previous secret no longer works; an earlier attempt .* may have rotated it already/)

  const plain = setup(t, server.url, ['rotate', 'ci'])
  await rotateKey(plain.args as Extract<KeysArgs, { action: 'rotate' }>, plain.client)
  t.same(JSON.parse(server.seen[1]!.body), {}, 'no --grace: the service\'s default')
})

t.test('list: the table, limits in human units, usage and times in UTC', async t => {
  const keys = [
    key('admin', { admin: true, source: 'environment', created_at: null }),
    key('ci-main', { limits: { max_file_size: 2 * 1024 ** 3, quota_bytes: 50 * 1024 ** 3, max_open_sessions: 4, uploads_per_minute: 10 }, usage: { stored_bytes: 1536 * 1024 ** 2, last_used_at: '2026-11-28T07:12:40.000Z' }, expires_at: '2027-01-01T00:00:00.000Z' })
  ]
  const server = await stub(t, (_s, _n, _req, res) => answer(res, 200, { keys }))
  const { args, client } = setup(t, server.url, ['list'])
  const list = await listKeys(args, client)
  t.same(list, { keys })
  t.equal(keysTable(list.keys), [
    'NAME     ADMIN  SOURCE       STORED   LAST USED             EXPIRES               LIMITS',
    'admin    yes    environment  0 bytes  never                 never                 -',
    'ci-main  no     store        1.5 GiB  2026-11-28 07:12 UTC  2027-01-01 00:00 UTC  file 2 GiB, quota 50 GiB, sessions 4, uploads 10/min',
    ''
  ].join('\n'))
})

t.test('create: every attempt unanswered: exit 6, and the key may exist all the same', async t => {
  const server = await stub(t, (_s, _n, req) => { req.socket.destroy() })
  const { args, client } = setup(t, server.url, ['create', '--name', 'ci'])
  const err = await failure(createKey(args as Extract<KeysArgs, { action: 'create' }>, client))
  t.equal(err.exitCode, EXIT.NETWORK)
  t.match(err.message, /^create key: .*\(after 3 attempts\); the key may have been created all the same.*"dropcode keys list" shows whether ci exists$/)
})
