/**
 * Human units for what the CLI prints about API keys: byte limits and usage in binary units (as
 * --max-file-size and --quota take them), durations for --grace, and times in UTC (a CI log
 * and the service's clock agree on it; the local zone of a runner rarely means anything).
 */
import { CliError, EXIT } from './exit-codes.js'

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const

/** 50 GiB, 1.5 MiB, 812 bytes: one decimal at most, none when the value is whole. */
export function humanBytes (bytes: number): string {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? '' : 's'}`
  let value = bytes
  let unit = -1
  while (value >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit++ }
  return `${Number(value.toFixed(1))} ${UNITS[unit]!}`
}

const SECONDS = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 } as Record<string, number>

/** "3600", "90s", "10m", "1h", "2d" → seconds (0 allowed: no grace). */
export function parseDuration (value: string, name: string): number {
  const m = /^(\d{1,9})([smhd]?)$/.exec(value.trim())
  if (m === null) throw new CliError(EXIT.USAGE, `--${name} must be seconds or a duration such as 90s, 10m, 1h or 2d, not "${value}" (see --help)`)
  return Number(m[1]) * SECONDS[m[2]!]!
}

/** 2026-11-28 07:24 UTC; "never" for null. */
export function humanTime (iso: string | null): string {
  if (iso === null) return 'never'
  const date = new Date(iso)
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`
}
