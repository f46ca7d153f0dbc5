/**
 * `dropcode keys list` as a table for people (scripts take --json): one row per key, its limits
 * in the units they are given in (a byte limit as --quota takes it), "-" where the service's own
 * limit applies.
 */
import type { KeyAnswer, KeyLimitsAnswer } from '../api/answers.js'
import { humanBytes, humanTime } from './units.js'

const LIMITS: Array<[keyof KeyLimitsAnswer, string, (n: number) => string]> = [
  ['max_file_size', 'file', humanBytes],
  ['quota_bytes', 'quota', humanBytes],
  ['max_downloads', 'downloads', String],
  ['max_expiry_hours', 'expiry', n => `${n} h`],
  ['max_open_sessions', 'sessions', String],
  ['uploads_per_minute', 'uploads', n => `${n}/min`]
]

/** "file 2 GiB, quota 50 GiB", or "-": the service's limits. */
export function limitsText (limits: KeyLimitsAnswer): string {
  const parts = LIMITS.filter(([field]) => limits[field] !== undefined).map(([field, label, show]) => `${label} ${show(limits[field]!)}`)
  return parts.length > 0 ? parts.join(', ') : '-'
}

const HEADER = ['NAME', 'ADMIN', 'SOURCE', 'STORED', 'LAST USED', 'EXPIRES', 'LIMITS']

export function keysTable (keys: KeyAnswer[]): string {
  const rows = keys.map(k => [
    k.name,
    k.admin ? 'yes' : 'no',
    k.source,
    humanBytes(k.usage.stored_bytes),
    humanTime(k.usage.last_used_at),
    humanTime(k.expires_at),
    // A rotation's grace is worth seeing: two secrets work until then.
    limitsText(k.limits) + (k.previous_secret_until !== null ? `; previous secret until ${humanTime(k.previous_secret_until)}` : '')
  ])
  const widths = HEADER.map((h, i) => Math.max(h.length, ...rows.map(r => r[i]!.length)))
  // The last column is not padded: no trailing blanks.
  const line = (cells: string[]) => cells.map((c, i) => i < cells.length - 1 ? c.padEnd(widths[i]!) : c).join('  ')
  return [HEADER, ...rows].map(line).join('\n') + '\n'
}
