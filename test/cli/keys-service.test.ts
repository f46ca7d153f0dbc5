/**
 * `dropcode keys` against the real service (its entry point as a process, the embedded
 * default with no API_KEYS: the admin key is the one kept in DATA_DIR/admin-key), the way an
 * operator uses it: create a key for a pipeline, upload with it, list, rotate, revoke; and the
 * pipeline's view of its key's limits (exit 7, the limit in words).
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { dataDir } from '../helpers/tmp.js'
import { startServer } from '../helpers/server-process.js'
import { cliEnv, runCli } from './run.js'

t.test('an operator makes a key for a pipeline, which uploads within its limits; rotate and revoke', async t => {
  const dir = dataDir(t)
  const server = await startServer(t, { DATA_DIR: dir })
  const adminKey = fs.readFileSync(path.join(dir, 'admin-key'), 'utf8').trim()
  const admin = cliEnv(t, server.url, adminKey)

  const made = await runCli(t, ['keys', 'create', '--name', 'ci-main', '--max-file-size', '10K', '--quota', '30K', '--max-sessions', '1'], admin)
  t.equal(made.status, 0, made.stderr)
  const secret = made.stdout.trim()
  t.match(secret, /^dck_[A-Za-z0-9_-]{43}$/, 'stdout holds the secret alone')
  t.match(made.stderr, /once/, 'stderr says it is shown once')

  const ci = cliEnv(t, server.url, secret)
  const small = path.join(ci.cwd, 'small.txt')
  fs.writeFileSync(small, 'x'.repeat(6000))
  const up = await runCli(t, ['upload', small], ci)
  t.equal(up.status, 0, up.stderr)
  t.match(up.stdout, /^[A-Za-z0-9]{6}\n$/)

  const big = path.join(ci.cwd, 'big.bin')
  fs.writeFileSync(big, Buffer.alloc(12_000))
  const tooBig = await runCli(t, ['upload', big], ci)
  t.equal(tooBig.status, 7, 'refused: exit 7, not retried')
  t.match(tooBig.stderr, /this API key's \(ci-main\) limit of 10 KiB per file \(413 DROPCODE_FILE_TOO_LARGE\)/, `the key's limit in words: ${tooBig.stderr}`)

  fs.writeFileSync(small, 'y'.repeat(9000))
  t.equal((await runCli(t, ['upload', small], ci)).status, 0)
  t.equal((await runCli(t, ['upload', small], ci)).status, 0)
  const over = await runCli(t, ['upload', small], ci)
  t.equal(over.status, 7, 'over the quota: exit 7')
  t.match(over.stderr, /quota/i)
  t.match(over.stderr, /ci-main/)
  t.match(over.stderr, /DROPCODE_QUOTA_EXCEEDED/)

  const list = await runCli(t, ['keys', 'list', '--json'], admin)
  t.equal(list.status, 0, list.stderr)
  const keys = (JSON.parse(list.stdout) as { keys: Array<{ name: string, source: string, usage: { stored_bytes: number } }> }).keys
  t.match(keys.find(k => k.name === 'ci-main'), { source: 'store', usage: { stored_bytes: 24_000 } })
  t.ok(keys.some(k => k.source === 'environment'), 'the kept admin key is listed too')
  t.notMatch(list.stdout, secret, 'never a secret')
  const table = await runCli(t, ['keys', 'list'], admin)
  t.match(table.stdout, /ci-main/)

  t.equal((await runCli(t, ['keys', 'list'], ci)).status, 7, 'a plain key may not manage keys')

  const rotated = await runCli(t, ['keys', 'rotate', 'ci-main', '--grace', '0'], admin)
  t.equal(rotated.status, 0, rotated.stderr)
  const fresh = rotated.stdout.trim()
  t.match(fresh, /^dck_/)
  await new Promise(resolve => setTimeout(resolve, 600)) // past the key cache
  const old = await runCli(t, ['upload', small], ci)
  t.equal(old.status, 3, 'the old secret, past its grace: exit 3 (401)')
  const deleted = await runCli(t, ['delete', up.stdout.trim()], ci)
  t.equal(deleted.status, 0, 'deleting needs no key')
  t.equal((await runCli(t, ['upload', small], cliEnv(t, server.url, fresh))).status, 0, 'the new secret uploads, and the name kept its usage: room after the delete')

  const revoked = await runCli(t, ['keys', 'revoke', 'ci-main'], admin)
  t.equal(revoked.status, 0, revoked.stderr)
  t.equal((await runCli(t, ['upload', small], cliEnv(t, server.url, fresh))).status, 3, 'revoked: exit 3')
  t.equal((await runCli(t, ['keys', 'revoke', 'ci-main'], admin)).status, 4, 'no such key: exit 4')
})
