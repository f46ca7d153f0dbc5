/**
 * `Content-Disposition: attachment` per RFC 6266 with an RFC 8187 `filename*`.
 *
 * The quoted `filename` is an ASCII fallback for old clients: non-ASCII, quotes, backslashes
 * and control characters become `_`, so the quoted string needs no escapes that some clients
 * mishandle. `filename*=UTF-8''…` carries the real name, percent-encoded byte by byte; it is
 * omitted when the fallback already is the name. Nothing from the name can end or split the
 * header: every byte outside a safe ASCII set is encoded.
 */
const encodeRfc8187 = (value: string) =>
  encodeURIComponent(value).replace(/['()*]/g, c => '%' + c.charCodeAt(0).toString(16).toUpperCase())

export function attachmentDisposition (filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_')
  const header = `attachment; filename="${fallback}"`
  return fallback === filename ? header : `${header}; filename*=UTF-8''${encodeRfc8187(filename)}`
}
