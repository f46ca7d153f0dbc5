/**
 * Filenames arrive from clients and leave in a response header, so they are cleaned once at
 * upload and encoded again for the header (content-disposition.ts).
 */

// C0 and C1 controls, DEL, and the Unicode line/paragraph separators.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g // eslint-disable-line no-control-regex
const MAX_FILENAME_BYTES = 255

/**
 * The base name of a client-supplied filename: path parts (either slash) and control
 * characters removed, at most 255 UTF-8 bytes (cut on a character boundary, keeping the
 * extension when there is one). Empty, `.` and `..` become `download`.
 */
export function cleanFilename (raw: string | undefined): string {
  const base = (raw ?? '').split(/[/\\]/).pop()!.replace(CONTROL, '').trim()
  if (base === '' || base === '.' || base === '..') return 'download'
  if (Buffer.byteLength(base) <= MAX_FILENAME_BYTES) return base
  const dot = base.lastIndexOf('.')
  const ext = dot > 0 && base.length - dot <= 16 ? base.slice(dot) : ''
  let stem = ''
  for (const ch of base.slice(0, base.length - ext.length)) {
    if (Buffer.byteLength(stem + ch + ext) > MAX_FILENAME_BYTES) break
    stem += ch
  }
  return stem + ext
}

/**
 * Content types a browser will not render as active content from our origin. Anything else
 * (HTML, SVG, XML, PDF, JavaScript, unknown) is served as application/octet-stream. The type
 * comes from the extension, never from the client's declared Content-Type.
 */
const SAFE_TYPES: Record<string, string> = {
  txt: 'text/plain; charset=utf-8',
  log: 'text/plain; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  json: 'application/json',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  zip: 'application/zip',
  gz: 'application/gzip',
  tgz: 'application/gzip',
  tar: 'application/x-tar',
  zst: 'application/zstd',
  xz: 'application/x-xz',
  bz2: 'application/x-bzip2',
  '7z': 'application/x-7z-compressed',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  webm: 'video/webm'
}

export function contentTypeFor (filename: string): string {
  const dot = filename.lastIndexOf('.')
  const ext = dot >= 0 ? filename.slice(dot + 1).toLowerCase() : ''
  return SAFE_TYPES[ext] ?? 'application/octet-stream'
}
