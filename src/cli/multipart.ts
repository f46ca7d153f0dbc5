/**
 * multipart/form-data bodies built as streams with an exact length: text fields, then at most
 * one file part whose bytes come from a stream opened per attempt (so a retry re-reads the
 * source, and nothing is held in memory but what is already in a buffer), then text fields
 * whose values are only known once the file has streamed (the SHA-256 of a single upload).
 */
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { InputChanged } from './exit-codes.js'

type Part =
  | { kind: 'bytes', data: Buffer }
  | { kind: 'stream', length: number | undefined, open: () => Readable }
  | { kind: 'late', length: number, value: () => string | Promise<string> }

const CRLF = '\r\n'
/** Escapes a name as browsers, curl and the service's parser expect (HTML form encoding). */
const quote = (s: string) => s.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A')

export class Multipart {
  private readonly boundary = `----dropcode${randomBytes(12).toString('hex')}`
  private readonly parts: Part[] = []

  field (name: string, value: string | number | undefined): this {
    if (value === undefined) return this
    this.bytes(`--${this.boundary}${CRLF}Content-Disposition: form-data; name="${quote(name)}"${CRLF}${CRLF}${value}${CRLF}`)
    return this
  }

  /** A file part; `data` is a buffer, or a stream factory for `length` bytes. */
  file (name: string, filename: string, data: Buffer | { length: number | undefined, open: () => Readable }): this {
    this.bytes(`--${this.boundary}${CRLF}Content-Disposition: form-data; name="${quote(name)}"; filename="${quote(filename)}"${CRLF}` +
      `Content-Type: application/octet-stream${CRLF}${CRLF}`)
    this.parts.push(Buffer.isBuffer(data) ? { kind: 'bytes', data } : { kind: 'stream', ...data })
    this.bytes(CRLF)
    return this
  }

  /**
   * A field after the file whose value (of exactly `length` characters) is asked for when it is
   * sent: a digest computed while the file part went out.
   */
  lateField (name: string, length: number, value: () => string | Promise<string>): this {
    this.bytes(`--${this.boundary}${CRLF}Content-Disposition: form-data; name="${quote(name)}"${CRLF}${CRLF}`)
    this.parts.push({ kind: 'late', length, value })
    this.bytes(CRLF)
    return this
  }

  headers (): Record<string, string> {
    return { 'content-type': `multipart/form-data; boundary=${this.boundary}` }
  }

  /** The body for one attempt: its length and a fresh stream of it. */
  body (): { length: number | undefined, open: () => Readable } {
    const end = Buffer.from(`--${this.boundary}--${CRLF}`)
    const parts = this.parts
    let length: number | undefined = end.length
    for (const p of parts) length = length === undefined || (p.kind === 'stream' && p.length === undefined) ? undefined : length + (p.kind === 'bytes' ? p.data.length : p.length!)
    async function * generate () {
      for (const p of parts) {
        if (p.kind === 'bytes') yield p.data
        else if (p.kind === 'late') {
          const value = Buffer.from(await p.value())
          if (value.length !== p.length) throw new Error(`late field of ${value.length} bytes, ${p.length} announced`)
          yield value
        } else {
          let sent = 0
          for await (const chunk of p.open() as AsyncIterable<Buffer>) {
            sent += chunk.length
            yield chunk
          }
          if (p.length !== undefined && sent !== p.length) throw new InputChanged(`the input changed while it was sent (${sent} bytes, ${p.length} expected)`)
        }
      }
      yield end
    }
    return { length, open: () => Readable.from(generate(), { objectMode: false }) }
  }

  private bytes (s: string) {
    this.parts.push({ kind: 'bytes', data: Buffer.from(s) })
  }
}
