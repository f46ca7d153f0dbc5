/**
 * `Range: bytes=…` (RFC 9110 §14.1.2) read into the domain's RangeSpec (core/byte-range.ts).
 * dropcode serves one range at a time, and only to the holder of a download claim (see
 * routes/download.ts):
 *   bytes=first-last, bytes=first-, bytes=-suffix → that range
 *   several ranges, another unit, bad syntax       → undefined: the whole file
 */
import type { RangeSpec } from '../core/byte-range.js'

const SPEC = /^(?:(\d{1,15})-(\d{0,15})|-(\d{1,15}))$/

export function parseRange (header: string): RangeSpec | undefined {
  const m = /^bytes=(.+)$/i.exec(header.trim())
  if (m === null) return undefined
  const specs = m[1]!.split(',').map(s => s.trim())
  if (specs.length > 1) return undefined
  const spec = SPEC.exec(specs[0]!)
  if (spec === null) return undefined
  if (spec[3] !== undefined) return { suffix: Number(spec[3]) }
  const first = Number(spec[1])
  const last = spec[2] === '' ? undefined : Number(spec[2])
  if (last !== undefined && last < first) return undefined
  return { first, last }
}
