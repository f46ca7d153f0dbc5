/**
 * The real entry point as a user runs it (`npm start` runs src/server.ts): configuration
 * errors, the zero-setup embedded default, and a restart that loses nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { createInterface } from 'node:readline'
import t from 'tap'
import { dataDir, form } from './helpers/app.js'

const root = path.resolve(import.meta.dirname, '..')

interface Server { child: ChildProcess, url: string, logs: Array<Record<string, unknown>>, stderr: () => string }

async function startServer (env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['--import=tsx', 'src/server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const logs: Array<Record<string, unknown>> = []
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start in 20 s')), 20_000)
    createInterface({ input: child.stdout! }).on('line', line => {
      const entry = JSON.parse(line) as Record<string, unknown>
      logs.push(entry)
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(String(entry.msg))
      if (m) { clearTimeout(timer); resolve(m[1]!) }
    })
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`server exited with ${code}`)) })
  })
  return { child, url, logs, stderr: () => stderr }
}

/** SIGTERM; resolves with the exit code, or a description of what went wrong (for the diff). */
async function stop (server: Server): Promise<number | string> {
  if (server.child.exitCode !== null) return server.child.exitCode
  const exited = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  const [code, signal] = await exited as [number | null, string | null]
  if (code === 0) return 0
  const tail = server.logs.slice(-5).map(l => JSON.stringify(l)).join('\n')
  return `exit ${String(code)} signal ${String(signal)}\nstderr: ${server.stderr().slice(-2000)}\nlast logs:\n${tail}`
}

t.test('a bad setting stops start-up, naming the variable', async t => {
  const child = spawn(process.execPath, ['--import=tsx', 'src/server.ts'], { cwd: root, env: { PATH: process.env.PATH, PORT: 'eighty' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString() })
  const [code] = await once(child, 'exit')
  t.equal(code, 2)
  t.match(stderr, /invalid PORT="eighty"/)
})

t.test('zero setup: a generated key is logged once; a restart loses nothing', async t => {
  const dir = dataDir(t)
  const first = await startServer({ DATA_DIR: dir })
  const keyLog = first.logs.find(l => typeof l.apiKey === 'string')
  t.ok(keyLog, 'the generated key is logged')
  const key = String(keyLog!.apiKey)
  const res = await fetch(`${first.url}/upload`, { method: 'POST', headers: { 'x-client-key': key }, body: form([['file', { data: 'survives' }], ['max_downloads', '2']]) })
  const { code } = await res.json() as { code: string }
  const firstDownload = await fetch(`${first.url}/download/${code}`)
  t.equal(firstDownload.status, 200)
  t.equal(await firstDownload.text(), 'survives')
  t.equal(await stop(first), 0, 'SIGTERM: clean exit')

  const second = await startServer({ DATA_DIR: dir, API_KEYS: 'fixed-key' })
  t.teardown(() => stop(second))
  const again = await fetch(`${second.url}/download/${code}`)
  t.equal(again.status, 200)
  t.equal(await again.text(), 'survives', 'file and its download count survived the restart')
  t.equal((await fetch(`${second.url}/download/${code}`)).status, 404)
  t.notOk(second.logs.some(l => typeof l.apiKey === 'string'), 'no key logged when API_KEYS is set')
  t.notOk(JSON.stringify(second.logs).includes(`/download/${code}`), 'codes are not logged in full')
})

t.test('shutdown is bounded by SHUTDOWN_GRACE_SECONDS even with a stalled download', async t => {
  const server = await startServer({ DATA_DIR: dataDir(t), API_KEYS: 'k', SHUTDOWN_GRACE_SECONDS: '1' })
  const big = new Uint8Array(32 * 1024 * 1024)
  const res = await fetch(`${server.url}/upload`, { method: 'POST', headers: { 'x-client-key': 'k' }, body: form([['file', { data: big }]]) })
  const { code } = await res.json() as { code: string }
  const stalled = await fetch(`${server.url}/download/${code}`) // headers read, body never consumed
  t.equal(stalled.status, 200)
  const t0 = Date.now()
  t.equal(await stop(server), 0)
  const took = Date.now() - t0
  t.ok(took >= 900 && took < 10_000, `stopped after ${took} ms`)
})

t.test('a shutdown during an upload leaves nothing behind', async t => {
  const dir = dataDir(t)
  const server = await startServer({ DATA_DIR: dir, API_KEYS: 'k', SHUTDOWN_GRACE_SECONDS: '1' })
  const { default: http } = await import('node:http')
  const req = http.request(`${server.url}/upload`, {
    method: 'POST',
    headers: { 'x-client-key': 'k', 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(256 * 1024 * 1024) }
  })
  req.on('error', () => {})
  req.write('--x\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\n')
  await new Promise<void>(resolve => req.write(Buffer.alloc(4 * 1024 * 1024), () => resolve()))
  t.equal(await stop(server), 0, 'clean exit after the grace period')
  req.destroy()
  const { readdirSync, existsSync } = await import('node:fs')
  const blobs = path.join(dir, 'blobs')
  const left = existsSync(blobs) ? readdirSync(blobs, { recursive: true, withFileTypes: true }).filter(e => e.isFile()) : []
  t.same(left.map(e => e.name), [], 'no object or partial file')
})
