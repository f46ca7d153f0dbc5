/**
 * A chunk upload whose body the test sends piece by piece (node:http, chunked encoding), so a
 * request can be held open mid-chunk: to kill the instance receiving it, or to outlast a lock's
 * lease while it streams.
 */
import http from 'node:http'
import { API_KEY } from './app.js'

const BOUNDARY = 'dropcode-slow-chunk'

export interface SlowChunk {
  /** Sends more of the chunk's bytes. */
  write (data: Uint8Array): Promise<void>
  /**
   * Ends the chunk part and starts the `chunk_sha256` field without its value: the server has the
   * whole chunk (and stores it) but not the whole request, so it records nothing yet.
   */
  holdAfterChunk (): Promise<void>
  /** Sends the rest of the form (after holdAfterChunk: `value`, the chunk's SHA-256) and resolves with the answer. */
  end (value?: string): Promise<{ status: number, body: Record<string, unknown> }>
  /** Resolves with the answer, or rejects when the connection is cut (the instance died). */
  readonly answer: Promise<{ status: number, body: Record<string, unknown> }>
}

export function slowChunk (url: string, uploadId: string, index: number): SlowChunk {
  const req = http.request(`${url}/upload/chunk`, {
    method: 'POST',
    headers: { 'x-client-key': API_KEY, 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'transfer-encoding': 'chunked' }
  })
  const answer = new Promise<{ status: number, body: Record<string, unknown> }>((resolve, reject) => {
    req.once('error', reject)
    req.once('response', res => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.once('error', reject)
      res.once('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }))
    })
  })
  answer.catch(() => {}) // observed by the caller when it cares
  const field = (name: string, value: string) => `--${BOUNDARY}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
  req.write(field('upload_id', uploadId) + field('chunk_index', String(index)) +
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="chunk"; filename="blob"\r\ncontent-type: application/octet-stream\r\n\r\n`)
  return {
    answer,
    write: data => new Promise((resolve, reject) => req.write(data, err => err ? reject(err) : resolve())),
    holdAfterChunk: () => new Promise((resolve, reject) => req.write(`\r\n--${BOUNDARY}\r\ncontent-disposition: form-data; name="chunk_sha256"\r\n\r\n`, err => err ? reject(err) : resolve())),
    async end (value = '') {
      req.end(`${value}\r\n--${BOUNDARY}--\r\n`)
      return await answer
    }
  }
}
