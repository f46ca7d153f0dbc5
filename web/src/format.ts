/** Formatting for people, and parsing of the download headers the info page reads. */

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB']

/** 0 B, 900 B, 1.5 KiB, 12.3 MiB, 5 GiB (binary units, as the service's limits are). */
export function formatBytes (n: number): string {
  let i = 0
  let v = n
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024
    i++
  }
  if (i === 0) return `${v} B`
  const text = v >= 100 ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, '')
  return `${text} ${UNITS[i]}`
}

/** "12 s", "3 min", "1 h 20 min". */
export function formatDuration (seconds: number): string {
  const s = Math.max(1, Math.round(seconds))
  if (s < 60) return `${s} s`
  const min = Math.round(s / 60)
  if (min < 60) return `${min} min`
  const h = Math.floor(min / 60)
  const rest = min % 60
  return rest === 0 ? `${h} h` : `${h} h ${rest} min`
}

/** "24 hours (1 day)", "1 hour", "720 hours (30 days)". */
export function formatHours (h: number): string {
  const base = `${h} ${h === 1 ? 'hour' : 'hours'}`
  if (h < 24 || h % 24 !== 0) return base
  const d = h / 24
  return `${base} (${d} ${d === 1 ? 'day' : 'days'})`
}

/** The filename of a Content-Disposition header: RFC 8187 `filename*` first, else `filename`. */
export function dispositionFilename (header: string | null): string | undefined {
  if (header === null) return undefined
  const extended = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header)
  if (extended !== null) {
    try {
      return decodeURIComponent(extended[1]!.trim())
    } catch { /* malformed: fall back to the plain name */ }
  }
  const plain = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(header) ?? /filename\s*=\s*([^;\s]+)/i.exec(header)
  return plain === null ? undefined : plain[1]!.replace(/\\(.)/g, '$1')
}

/** The SHA-256 of an RFC 9530 `Repr-Digest: sha-256=:<base64>:` header, as hex (what sha256sum prints). */
export function reprDigestHex (header: string | null): string | undefined {
  const m = /sha-256=:([A-Za-z0-9+/]+={0,2}):/.exec(header ?? '')
  if (m === null) return undefined
  const bin = atob(m[1]!)
  if (bin.length !== 32) return undefined
  return Array.from(bin, c => c.charCodeAt(0).toString(16).padStart(2, '0')).join('')
}

/**
 * Hex SHA-256 of bytes, with Web Crypto (one-shot: the page hashes one chunk at a time), or
 * undefined where Web Crypto is missing: browsers offer it to secure contexts only (HTTPS,
 * localhost), and the upload then goes without declared digests.
 */
export async function sha256Hex (data: ArrayBuffer): Promise<string | undefined> {
  if (globalThis.crypto?.subtle === undefined) return undefined
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data))
  return Array.from(digest, b => b.toString(16).padStart(2, '0')).join('')
}
