/**
 * `Range: bytes=…` (RFC 9110 §14.1.2) for one representation of `size` bytes. dropcode serves
 * one range at a time, and only to the holder of a download claim (see services/files.ts):
 *   bytes=first-last, bytes=first-, bytes=-suffix     → a range (last clamped to the end)
 *   a syntactically valid range starting past the end → unsatisfiable (416)
 *   several ranges                                     → multi (served as the whole file)
 *   anything else (another unit, bad syntax)           → ignored
 */
import type { ByteRange } from '../blob/index.js'

export type RangeRequest =
  | { kind: 'range', range: ByteRange }
  | { kind: 'unsatisfiable' }
  | { kind: 'multi' }
  | { kind: 'ignored' }

const SPEC = /^(?:(\d{1,15})-(\d{0,15})|-(\d{1,15}))$/

export function parseRange (header: string, size: number): RangeRequest {
  const m = /^bytes=(.+)$/i.exec(header.trim())
  if (m === null) return { kind: 'ignored' }
  const specs = m[1]!.split(',').map(s => s.trim())
  if (specs.length > 1) return specs.every(s => SPEC.test(s)) ? { kind: 'multi' } : { kind: 'ignored' }
  const spec = SPEC.exec(specs[0]!)
  if (spec === null) return { kind: 'ignored' }
  if (spec[3] !== undefined) {
    const suffix = Number(spec[3])
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' }
    return { kind: 'range', range: { start: Math.max(0, size - suffix), end: size - 1 } }
  }
  const start = Number(spec[1])
  const last = spec[2] === '' ? Infinity : Number(spec[2])
  if (last < start) return { kind: 'ignored' }
  if (start >= size) return { kind: 'unsatisfiable' }
  return { kind: 'range', range: { start, end: Math.min(last, size - 1) } }
}
