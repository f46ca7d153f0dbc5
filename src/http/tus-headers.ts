/**
 * The request headers of tus 1.0.0 (https://tus.io/protocols/resumable-upload), parsed strictly:
 * a malformed header is DROPCODE_INVALID_FIELD naming it, never a guess.
 */
import type { FastifyRequest } from 'fastify'
import { DropcodeError } from '../core/errors.js'

export const TUS_VERSION = '1.0.0'

/** Upload-Checksum algorithms (tus names → node:crypto names). */
export const CHECKSUM_ALGORITHMS: Record<string, string> = { sha1: 'sha1', sha256: 'sha256', md5: 'md5' }

const DECIMAL = /^(0|[1-9][0-9]{0,15})$/
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

const header = (req: FastifyRequest, name: string): string | undefined => {
  const value = req.headers[name]
  return Array.isArray(value) ? value.join(',') : value
}

/** A non-negative integer header (Upload-Offset, Upload-Length), or undefined when absent. */
export function integerHeader (req: FastifyRequest, name: string): number | undefined {
  const value = header(req, name.toLowerCase())
  if (value === undefined) return undefined
  const n = DECIMAL.test(value.trim()) ? Number(value.trim()) : NaN
  if (!Number.isSafeInteger(n)) throw new DropcodeError('DROPCODE_INVALID_FIELD', `Header ${name} must be a non-negative integer.`)
  return n
}

/**
 * Upload-Metadata: comma-separated `key base64value` pairs (the value may be absent); keys
 * unique, without spaces or commas. Values are decoded as UTF-8.
 */
export function parseMetadata (raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  if (raw === undefined || raw.trim() === '') return out
  for (const pair of raw.split(',')) {
    const [key, value, extra] = pair.trim().split(' ')
    if (key === undefined || key === '' || extra !== undefined || (value !== undefined && !BASE64.test(value))) {
      throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Header Upload-Metadata must be comma-separated pairs of a key and a base64 value, separated by a space.')
    }
    if (Object.hasOwn(out, key)) throw new DropcodeError('DROPCODE_DUPLICATE_FIELD', `Upload-Metadata names "${key}" twice.`)
    out[key] = value === undefined ? '' : Buffer.from(value, 'base64').toString('utf8')
  }
  return out
}

/** Upload-Checksum: `algorithm base64digest`; 400 for an algorithm not in Tus-Checksum-Algorithm. */
export function parseChecksum (req: FastifyRequest): { algorithm: string, digest: Buffer } | undefined {
  const value = header(req, 'upload-checksum')
  if (value === undefined) return undefined
  const [name, digest, extra] = value.trim().split(' ')
  const algorithm = CHECKSUM_ALGORITHMS[name ?? '']
  if (algorithm === undefined) throw new DropcodeError('DROPCODE_INVALID_FIELD', `Upload-Checksum's algorithm must be one of ${Object.keys(CHECKSUM_ALGORITHMS).join(', ')}.`)
  if (digest === undefined || extra !== undefined || !BASE64.test(digest)) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Header Upload-Checksum must be an algorithm and a base64 digest, separated by a space.')
  return { algorithm, digest: Buffer.from(digest, 'base64') }
}

/** Whether the request carries an append's body (creation-with-upload, PATCH). */
export const isOffsetStream = (req: FastifyRequest) =>
  (header(req, 'content-type') ?? '').split(';', 1)[0]!.trim().toLowerCase() === 'application/offset+octet-stream'

const UPLOAD_ID = /^[A-Za-z0-9_-]{22}$/

/**
 * Upload-Concat: `partial`, or `final;URL URL …` (absolute URLs or paths of this service's
 * uploads; their last segment is the id), undefined when absent.
 */
export function parseConcat (req: FastifyRequest): 'partial' | string[] | undefined {
  const value = header(req, 'upload-concat')?.trim()
  if (value === undefined) return undefined
  if (value === 'partial') return 'partial'
  const match = /^final;(.+)$/.exec(value)
  const ids = match?.[1]!.trim().split(/ +/).map(url => url.replace(/\/+$/, '').split('/').pop() ?? '')
  if (ids === undefined || ids.length === 0 || !ids.every(id => UPLOAD_ID.test(id))) {
    throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Header Upload-Concat must be "partial", or "final;" and the URLs of the partial uploads, separated by spaces.')
  }
  return ids
}
