/**
 * SHA-256 off the main thread. For a chunked upload's one read of its input: each chunk's bytes
 * are handed over in index order (in a SharedArrayBuffer, so nothing is copied) and hashed in a
 * worker, both on their own (the chunk's `chunk_sha256`) and into the whole input's digest (sent
 * at /upload/complete), while the main thread sends the same bytes. On the main thread, one 8 MiB
 * `hash.update` holds the event loop for 5-15 ms, during which no socket is fed and no progress
 * drawn; the worker also puts the hashing on the second core, beside the sending. (A download
 * hashes on the main thread: its bytes arrive in the socket's buffers, and copying them into
 * shared memory cost more than the hash.)
 *
 * The worker is inline (eval) so that it runs the same from `dist/` and under tsx.
 */
import { Worker } from 'node:worker_threads'

const WORKER = `
const { parentPort } = require('node:worker_threads')
const { createHash } = require('node:crypto')
const whole = createHash('sha256')
parentPort.on('message', m => {
  if (m.finish) return parentPort.postMessage({ id: m.id, sha256: whole.digest('hex') })
  const data = new Uint8Array(m.buffer, m.offset, m.length)
  whole.update(data)
  parentPort.postMessage({ id: m.id, sha256: createHash('sha256').update(data).digest('hex') })
})`

/** A buffer whose bytes a worker can read without a copy. */
export const sharedBuffer = (length: number): Buffer => Buffer.from(new SharedArrayBuffer(length))

function shared (data: Buffer) {
  if (!(data.buffer instanceof SharedArrayBuffer)) throw new TypeError('the hasher needs bytes in a SharedArrayBuffer')
  return { buffer: data.buffer, offset: data.byteOffset, length: data.length }
}

/** SHA-256 in a worker thread: of each chunk given, and of all of them in order. */
export class Hasher {
  private readonly worker = new Worker(WORKER, { eval: true })
  private readonly waiting = new Map<number, { resolve: (sha256: string) => void, reject: (err: Error) => void }>()
  private next = 0
  private failed: Error | undefined

  constructor () {
    this.worker.on('message', ({ id, sha256 }: { id: number, sha256: string }) => {
      this.waiting.get(id)?.resolve(sha256)
      this.waiting.delete(id)
    })
    this.worker.on('error', err => this.fail(err))
    this.worker.on('exit', () => this.fail(new Error('the hashing worker exited')))
  }

  /**
   * The next chunk of the input (chunks must come in order): resolves with its SHA-256 (hex).
   * `data` must lie in a SharedArrayBuffer (sharedBuffer) and stay unchanged until then.
   */
  chunk (data: Buffer): Promise<string> {
    return this.ask(shared(data))
  }

  /** The SHA-256 (hex) of every chunk given, in order; the hasher is closed after it. */
  async finish (): Promise<string> {
    try {
      return await this.ask({ finish: true })
    } finally {
      this.close()
    }
  }

  /** Stops the worker; a chunk still waiting for its digest is rejected. */
  close (): void {
    this.worker.removeAllListeners('exit')
    this.worker.terminate().catch(() => {})
    this.fail(new Error('the hasher was closed'))
  }

  private ask (message: Record<string, unknown>): Promise<string> {
    if (this.failed !== undefined) return Promise.reject(this.failed)
    const id = this.next++
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject })
      this.worker.postMessage({ ...message, id })
    })
  }

  private fail (err: Error) {
    this.failed = err
    for (const w of this.waiting.values()) w.reject(err)
    this.waiting.clear()
  }
}
