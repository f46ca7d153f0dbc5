/**
 * Multipart part names over the limit (issue 19, "small departures"): a 1 MB field name was cut
 * by the parser without a word and the upload accepted, while the README says 400. Driven as it
 * was found: Node's fetch against the real server process, on both driver pairs.
 */
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { FIELD_NAME_BYTES } from '../../src/http/multipart-form.js'
import { API_KEY, rawMultipart, testEnv, type Backends, type DriverPair } from '../helpers/app.js'
import { startSession } from '../helpers/chunks.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { startServer, stopServer } from '../helpers/server-process.js'
import { listStored } from '../helpers/storage.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

async function send (url: string, path: string, parts: Parameters<typeof rawMultipart>[0]) {
  const { body, contentType } = rawMultipart(parts)
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'x-client-key': API_KEY, 'content-type': contentType }, body })
  return { status: res.status, body: await res.json() as Record<string, unknown> }
}

const file = { name: 'file', filename: 'f.txt', data: 'the file' }
const refused = { error: `A part's name is longer than ${FIELD_NAME_BYTES} bytes.`, code: 'DROPCODE_INVALID_FIELD' }

async function fieldNames (t: Test, pair: DriverPair, backends: Backends) {
  const env = testEnv(t, pair, backends)
  const server = await startServer(t, env)
  const { url } = server

  const atLimit = await send(url, '/upload', [file, { name: 'n'.repeat(FIELD_NAME_BYTES), data: 'ignored' }])
  t.equal(atLimit.status, 200, `a ${FIELD_NAME_BYTES}-byte unknown field name is read (and the field ignored)`)
  const stored = await listStored(loadConfig(env))

  for (const [what, parts] of [
    ['a 1 MB field name after the file', [file, { name: 'x'.repeat(1024 * 1024), data: 'v' }]],
    ['a 1 MB field name before the file', [{ name: 'x'.repeat(1024 * 1024), data: 'v' }, file]],
    [`a ${FIELD_NAME_BYTES + 1}-byte field name`, [file, { name: 'x'.repeat(FIELD_NAME_BYTES + 1), data: 'v' }]],
    [`a ${FIELD_NAME_BYTES + 1}-byte name in UTF-8 bytes (51 two-byte characters)`, [file, { name: 'é'.repeat(51), data: 'v' }]],
    ['a file part with a 1 MB name', [{ ...file, name: 'f'.repeat(1024 * 1024) }]]
  ] as const) {
    const res = await send(url, '/upload', [...parts])
    t.same(res, { status: 400, body: refused }, `/upload: ${what}`)
  }
  t.same(await listStored(loadConfig(env)), stored, 'the refused uploads left nothing behind')

  const long = { name: 'x'.repeat(1024 * 1024), data: 'v' }
  t.same(await send(url, '/upload/start', [{ name: 'filename', data: 'a' }, { name: 'total_chunks', data: '1' }, long]), { status: 400, body: refused }, '/upload/start')
  const id = await startSession(url, [['filename', 'a'], ['total_chunks', '1']])
  t.same(await send(url, '/upload/verify', [{ name: 'upload_id', data: id }, long]), { status: 400, body: refused }, '/upload/verify')
  t.same(await send(url, '/upload/chunk', [{ name: 'upload_id', data: id }, { name: 'chunk_index', data: '0' }, { name: 'chunk', filename: 'c', data: 'chunk' }, long]), { status: 400, body: refused }, '/upload/chunk')
  t.same(await send(url, '/upload/complete', [{ name: 'upload_id', data: id }, long]), { status: 400, body: refused }, '/upload/complete')
  t.equal(await stopServer(server), 0)
}

t.test('a field name over the limit is 400 DROPCODE_INVALID_FIELD, fs+local (field_name_truncated)', t => fieldNames(t, 'fs+local', {}))
t.test('a field name over the limit is 400 DROPCODE_INVALID_FIELD, s3+redis (field_name_truncated)', t => fieldNames(t, 's3+redis', { redis, s3 }))
