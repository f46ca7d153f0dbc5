/**
 * Filenames arrive from clients and leave in a response header, so they are cleaned once at
 * upload and encoded again for the header (content-disposition.ts).
 */

// C0 and C1 controls, DEL, the Unicode line/paragraph separators, and the bidirectional
// controls (embeddings, overrides, isolates, marks), which can make `invoice‮fdp.exe` display as
// `invoice.exe.pdf`.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g // eslint-disable-line no-control-regex
const MAX_FILENAME_BYTES = 255

/**
 * The filename of a multipart file part as the client meant it. The HTML standard's form
 * encoding, followed by browsers, curl, Node's fetch and Python's requests, escapes `"` as `%22`
 * and CR/LF as `%0D`/`%0A` inside `filename="…"`; exactly those three are decoded (anything else
 * that looks like an escape is a literal part of the name).
 */
export function multipartFilename (raw: string | undefined): string | undefined {
  return raw?.replace(/%22|%0D|%0A/gi, m => ({ '%22': '"', '%0D': '\r', '%0A': '\n' } as Record<string, string>)[m.toUpperCase()]!)
}

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
