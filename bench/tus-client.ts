/**
 * tus-js-client as the bench drives it (workload 6): one file from disk to a tus endpoint, the
 * same options for dropcode and for the peer, and what a server says it offers (OPTIONS).
 */
import { createReadStream } from 'node:fs'
import { performance } from 'node:perf_hooks'
import * as tus from 'tus-js-client'
import { BENCH_KEY } from './server-process.js'

/** What the bench sends every tus server: dropcode wants the key, the peer ignores it. */
const HEADERS = { 'X-Client-Key': BENCH_KEY }

export interface TusResult {
  /** The upload's URL (the final one of a concatenation). */
  url: string
  /** `Dropcode-Code` of the last response, or of a HEAD of the upload when the last response lacks it. */
  code: string | undefined
  /** From `start()` to `onSuccess`. */
  seconds: number
}

/**
 * Uploads `file` to `endpoint` with tus-js-client: `chunkSize` bytes per PATCH, and with
 * `parallelUploads` > 1 that many partial uploads at once, concatenated at the end (the
 * server must offer `concatenation`). The file is given as an fs.ReadStream, so tus-js-client
 * reads the slices it sends from disk (it refuses `uploadSize` with `parallelUploads`).
 */
export async function tusUpload (endpoint: string, file: string, opts: { chunkSize: number, parallelUploads: number }): Promise<TusResult> {
  const t0 = performance.now()
  const { url, lastCode } = await new Promise<{ url: string, lastCode: string | undefined }>((resolve, reject) => {
    const upload = new tus.Upload(createReadStream(file), {
      endpoint,
      headers: HEADERS,
      chunkSize: opts.chunkSize,
      parallelUploads: opts.parallelUploads,
      retryDelays: [],
      storeFingerprintForResuming: false,
      metadata: { filename: 'big.bin', filetype: 'application/octet-stream', max_downloads: '1000' },
      onError: reject,
      onSuccess: ({ lastResponse }) => resolve({ url: upload.url!, lastCode: lastResponse.getHeader('Dropcode-Code') ?? undefined })
    })
    upload.start()
  })
  const seconds = (performance.now() - t0) / 1000
  let code = lastCode
  if (code === undefined) {
    // The README's other way to the code: HEAD the upload with the key (not timed).
    const res = await fetch(url, { method: 'HEAD', headers: { ...HEADERS, 'Tus-Resumable': '1.0.0' } })
    code = res.headers.get('dropcode-code') ?? undefined
  }
  return { url, code, seconds }
}

/** The extensions a tus server names in `Tus-Extension` of `OPTIONS endpoint`. */
export async function tusExtensions (endpoint: string): Promise<Set<string>> {
  const res = await fetch(endpoint, { method: 'OPTIONS', headers: { 'Tus-Resumable': '1.0.0' } })
  await res.arrayBuffer()
  return new Set((res.headers.get('tus-extension') ?? '').split(',').map(s => s.trim()).filter(s => s !== ''))
}
