/** A chunked upload to the service (/upload/start, /upload/chunk × N with `inFlight` at once, /upload/complete), timed by phase. */
import type { Readable } from 'node:stream'
import { performance } from 'node:perf_hooks'
import { failures, inParallel, postForm } from './lib.js'
import { BENCH_KEY } from './server-process.js'

export interface ChunkedResult {
  code: string
  /** Seconds from the start request to the complete answer. */
  totalSeconds: number
  /** Seconds spent in /upload/complete. */
  completeSeconds: number
}

export async function chunkedUpload (url: string, opts: { chunks: number, chunkSize: number, inFlight: number, body: (index: number) => Readable, sha256: string }): Promise<ChunkedResult> {
  const headers = { 'x-client-key': BENCH_KEY }
  const t0 = performance.now()
  const start = await postForm(`${url}/upload/start`, { fields: [{ name: 'filename', value: 'big.bin' }, { name: 'total_chunks', value: String(opts.chunks) }, { name: 'max_downloads', value: '1000' }, { name: 'chunk_size', value: String(opts.chunkSize) }], headers })
  if (start.status !== 200) throw new Error(`/upload/start answered ${start.status}: ${start.text.slice(0, 300)}`)
  const id = (JSON.parse(start.text) as { upload_id: string }).upload_id
  await inParallel(opts.chunks, opts.inFlight, async i => {
    const answer = await postForm(`${url}/upload/chunk`, {
      fields: [{ name: 'upload_id', value: id }, { name: 'chunk_index', value: String(i) }],
      fileField: 'chunk',
      body: opts.body(i),
      size: opts.chunkSize,
      headers
    })
    if (answer.status !== 200) throw new Error(`chunk ${i} answered ${answer.status}: ${answer.text.slice(0, 300)}`)
  })
  const t1 = performance.now()
  const done = await postForm(`${url}/upload/complete`, { fields: [{ name: 'upload_id', value: id }], headers })
  const t2 = performance.now()
  if (done.status !== 200) throw new Error(`/upload/complete answered ${done.status}: ${done.text.slice(0, 300)}`)
  const body = JSON.parse(done.text) as { code: string, size: number, sha256: string }
  const size = opts.chunks * opts.chunkSize
  if (body.sha256 !== opts.sha256 || body.size !== size) failures.push(`chunked upload: the service assembled ${body.size} bytes, sha256 ${body.sha256} (sent ${size}, sha256 ${opts.sha256})`)
  return { code: body.code, totalSeconds: (t2 - t0) / 1000, completeSeconds: (t2 - t1) / 1000 }
}
