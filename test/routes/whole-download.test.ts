/**
 * A one-time file is gone once it has been fetched, whichever client fetched it (issue 20).
 * Found with `curl -fsS -o out URL`: curl closes the connection as soon as it has the
 * Content-Length bytes, which can be before the server has ended the response, and 16 of 40
 * objects were kept for the resume window as if their downloads had been cut. Driven the same
 * way: a real server process, real curl and wget, Node's fetch (keep-alive) and a raw socket that
 * closes right after the last byte; storage itself is checked, on both driver pairs. A download
 * really cut short (the client closes well before the last byte) keeps its object for resuming.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { loadConfig, type Config } from '../../src/config.js'
import { testEnv, upload, type DriverPair } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { startServer } from '../helpers/server-process.js'
import { listStored } from '../helpers/storage.js'
import { bytes, sha256Of } from '../helpers/streams.js'
import { dataDir } from '../helpers/tmp.js'

const run = promisify(execFile)
const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

/** Downloads `url` whole; resolves with the bytes received. */
type Client = (url: string, dir: string) => Promise<Buffer>

/** Reads one response on a raw connection; `closeAfter` bytes of body (default all), then closes at once. */
function rawGet (url: string, { closeAfter, headers = {} }: { closeAfter?: number, headers?: Record<string, string> } = {}): Promise<{ head: string, body: Buffer }> {
  const { hostname, port, pathname } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname)
    const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')
    socket.write(`GET ${pathname} HTTP/1.1\r\nHost: dropcode\r\n${extra}\r\n`) // keep-alive: the server never closes first
    let data = Buffer.alloc(0)
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      const end = data.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = data.subarray(0, end).toString('latin1')
      const length = Number(/^content-length: *(\d+)/im.exec(head)?.[1])
      const body = data.subarray(end + 4)
      if (body.length >= (closeAfter ?? length)) {
        socket.destroy()
        resolve({ head, body })
      }
    })
    socket.once('error', reject)
    socket.once('close', () => reject(new Error('connection closed before the expected bytes')))
  })
}

const clients: Record<string, Client> = {
  'curl -fsS -o': async (url, dir) => {
    const out = path.join(dir, `curl-${sha256Of(Buffer.from(url)).slice(0, 8)}`)
    await run('curl', ['-fsS', '-o', out, url])
    return fs.readFileSync(out)
  },
  'wget -q -O': async (url, dir) => {
    const out = path.join(dir, `wget-${sha256Of(Buffer.from(url)).slice(0, 8)}`)
    await run('wget', ['-q', '-O', out, url])
    return fs.readFileSync(out)
  },
  'fetch (keep-alive)': async url => {
    const res = await fetch(url)
    if (res.status !== 200) throw new Error(`status ${res.status}`)
    return Buffer.from(await res.arrayBuffer())
  },
  'raw socket closing after the last byte': async url => (await rawGet(url)).body
}

/**
 * Resolves once `config`'s storage holds nothing but `kept`, or fails the test if that takes past
 * `deadline` (epoch ms).
 */
async function goneBy (t: Test, config: Config, deadline: number, what: string, kept: string[] = []) {
  const left = async () => (await listStored(config)).filter(k => !kept.includes(k))
  let now = await left()
  while (now.length > 0 && Date.now() < deadline) {
    await sleep(50)
    now = await left()
  }
  t.same(now, [], `${what}: every object gone within 1 s of the last download`)
}

const FILES = 24

for (const pair of ['fs+local', 's3+redis'] as DriverPair[]) {
  t.test(`${pair}: the last permitted download, fetched whole by any client, deletes the object within 1 s (one_time_file_kept_after_curl)`, async t => {
    const env = testEnv(t, pair, { redis, s3 })
    const config = loadConfig(env)
    const server = await startServer(t, env)
    const dir = dataDir(t)
    for (const [name, client] of Object.entries(clients)) {
      const before = await listStored(config) // what an earlier client left (a failure of its own)
      const files = await Promise.all(Array.from({ length: FILES }, async (_, i) => {
        const data = bytes(200_000 + i * 4_099, i + 1)
        const up = await upload(server.url, [['max_downloads', '1'], ['file', { data, filename: `f${i}.bin` }]])
        t.equal(up.status, 200, `${name}: upload ${i}`)
        return { data, code: up.body.code }
      }))
      // All at once, as a CI fan-out would: each client downloads its file once, whole.
      const received = await Promise.all(files.map(f => client(`${server.url}/download/${f.code}`, dir)))
      const deadline = Date.now() + 1000
      t.same(received.map(sha256Of), files.map(f => sha256Of(f.data)), `${name}: every file received whole`)
      await goneBy(t, config, deadline, name, before)
      const again = await Promise.all(files.map(f => fetch(`${server.url}/download/${f.code}`, { method: 'HEAD' })))
      t.same(again.map(r => r.status), files.map(() => 404), `${name}: every code used up`)
    }
  })

  t.test(`${pair}: a download cut short keeps its object for resuming (cut_download_keeps_object)`, async t => {
    const env = testEnv(t, pair, { redis, s3 })
    const config = loadConfig(env)
    const server = await startServer(t, env)
    const data = bytes(24 * 1024 * 1024, 7)
    const up = await upload(server.url, [['max_downloads', '1'], ['file', { data, filename: 'big.bin' }]])
    const url = `${server.url}/download/${up.body.code}`
    // The client reads 64 KiB of 24 MiB and closes: far more than socket buffers hold is unsent.
    const cut = await rawGet(url, { closeAfter: 64 * 1024 })
    const etag = /^etag: *(\S+)/im.exec(cut.head)?.[1]
    await sleep(1500)
    t.equal((await listStored(config)).length, 1, 'the object is still stored after the cut')
    t.equal((await fetch(url, { method: 'HEAD' })).status, 404, 'the only download was claimed')
    const rest = await fetch(url, { headers: { range: `bytes=${cut.body.length}-`, 'if-range': etag! } })
    t.equal(rest.status, 206, 'the cut download resumes')
    t.equal(sha256Of(Buffer.concat([cut.body, Buffer.from(await rest.arrayBuffer())])), sha256Of(data), 'resumed whole')
    await goneBy(t, config, Date.now() + 1000, 'after the resume')
  })
}
