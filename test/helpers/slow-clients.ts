/**
 * The traffic of issue 20's starvation scenario (test/e2e/fairness/overload.ts), aimed at a
 * front given by its URL: the server itself, or a load balancer in front of instances. The slow
 * clients are raw sockets, so nothing between the test and the front smooths what they send;
 * the normal traffic is Node's fetch, timed.
 */
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { API_KEY, form } from './app.js'

const KiB = 1024
const MiB = 1024 * KiB

/** A raw connection the test holds open, and when things happened on it (ms since the epoch). */
export interface Held {
  socket: net.Socket
  openedAt: number
  /** When the kernel took the last byte the test wrote. */
  lastByteAt: number
  /** When the connection closed (by the far end: the test closes none before its checks). */
  closedAt?: number
  /** The first line of what the front answered ('' while nothing came). */
  answer: string
}

/** Opens a connection to `url`'s host and port and writes `request`; what comes back is read and dropped. */
export function open (url: string, request: string | Buffer, onClose?: () => void): Held {
  const { hostname, port } = new URL(url)
  const socket = net.connect(Number(port), hostname)
  const held: Held = { socket, openedAt: Date.now(), lastByteAt: Date.now(), answer: '' }
  socket.on('error', () => {})
  // Reading (and dropping) what the front answers lets its close be seen.
  socket.on('data', (c: Buffer) => { if (held.answer === '') held.answer = c.subarray(0, 80).toString('latin1').split('\r\n')[0]! })
  socket.on('close', () => { held.closedAt = Date.now(); onClose?.() })
  socket.write(request, () => { held.lastByteAt = Date.now() })
  return held
}

/** Headers and 64 KiB of a 10 MiB multipart upload (a single one, or a chunk with `fields`), then nothing. */
export function stalledUpload (url: string, key: string, path = '/upload', fields: Array<[string, string]> = []): Held {
  const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nX-Client-Key: ${key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${10 * MiB}\r\n\r\n` +
    fields.map(([name, value]) => `--b\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`).join('') +
    `--b\r\ncontent-disposition: form-data; name="${path === '/upload' ? 'file' : 'chunk'}"; filename="stalled.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`
  return open(url, Buffer.concat([Buffer.from(head), Buffer.alloc(64 * KiB, 1)]))
}

/** A download of `code` whose reader reads nothing: the sender's writes back up. */
export function stoppedReader (url: string, code: string): Held {
  const held = open(url, `GET /download/${code} HTTP/1.1\r\nHost: x\r\n\r\n`)
  held.socket.pause()
  return held
}

/**
 * `count` connections that trickle request headers, a line a second, never ending them; each
 * one cut is reopened until `stop()`, so `count` stay open. `all` holds every one opened.
 */
export function headerTricklers (url: string, count: number): { all: Held[], stop: () => void } {
  const all: Held[] = []
  let trickling = true
  const trickler = (): void => { all.push(open(url, 'POST /upload HTTP/1.1\r\nHost: x\r\n', () => { if (trickling) trickler() })) }
  for (let i = 0; i < count; i++) trickler()
  const drip = setInterval(() => {
    for (const h of all) if (h.closedAt === undefined) h.socket.write('X-Trickle: a\r\n', () => { h.lastByteAt = Date.now() })
  }, 1000)
  return { all, stop: () => { trickling = false; clearInterval(drip) } }
}

export interface NormalTraffic {
  uploads: number
  downloads: number
  /** Uploads answered 200: each stored one object. */
  stored: number
  /** One line per request that did not answer 200 within the deadline. */
  failures: string[]
  /** ms of the slowest request. */
  slowestMs: number
}

/**
 * For `durationMs`, a 100 KiB upload (with `key`) and a download of `code` (a 1 MiB file) each
 * every 200 ms, one after the other in each loop; each must answer 200 within `deadlineMs`
 * (given up on after 10 s).
 */
export async function normalTraffic (url: string, code: string, durationMs: number, deadlineMs: number, key = API_KEY): Promise<NormalTraffic> {
  const result: NormalTraffic = { uploads: 0, downloads: 0, stored: 0, failures: [], slowestMs: 0 }
  const startedAt = Date.now()
  const end = startedAt + durationMs
  const timed = async (what: string, run: () => Promise<number>): Promise<boolean> => {
    const started = Date.now()
    const status = await Promise.race([run(), sleep(10_000).then(() => 0)]).catch((err: Error) => `${err.message}`)
    const ms = Date.now() - started
    result.slowestMs = Math.max(result.slowestMs, ms)
    if (status !== 200 || ms > deadlineMs) result.failures.push(`${what} at +${Math.round((started - startedAt) / 100) / 10} s: ${status} after ${ms} ms`)
    return status === 200
  }
  const pace = async (loop: () => Promise<void>) => { while (Date.now() < end) { const next = Date.now() + 200; await loop(); await sleep(Math.max(0, next - Date.now())) } }
  await Promise.all([
    pace(async () => {
      result.uploads++
      const ok = await timed('upload', async () => {
        const res = await fetch(`${url}/upload`, { method: 'POST', headers: { 'x-client-key': key }, body: form([['file', { data: Buffer.alloc(100 * KiB, 4), filename: 'normal.bin' }]]) })
        await res.arrayBuffer()
        return res.status
      })
      if (ok) result.stored++
    }),
    pace(async () => {
      result.downloads++
      await timed('download', async () => {
        const res = await fetch(`${url}/download/${code}`)
        const body = await res.arrayBuffer()
        return res.status === 200 && body.byteLength === MiB ? 200 : res.status
      })
    })
  ])
  return result
}
