/**
 * `Content-Disposition: attachment` per RFC 6266 with an RFC 8187 `filename*`.
 *
 * The quoted `filename` is an ASCII fallback for clients that read only it (asciiFallback: a
 * transliteration where one exists, `_` for the rest), so the quoted string needs no escapes
 * that some clients mishandle. `filename*=UTF-8''…` carries the real name, percent-encoded byte by byte; it is
 * omitted when the fallback already is the name. Nothing from the name can end or split the
 * header: every byte outside a safe ASCII set is encoded.
 */
const encodeRfc8187 = (value: string) =>
  encodeURIComponent(value).replace(/['()*]/g, c => '%' + c.charCodeAt(0).toString(16).toUpperCase())

/**
 * The plain-ASCII form of a name for clients that read only `filename` (curl -OJ, HTTPie):
 * letters with accents lose them (NFKD, then combining marks dropped: `résumé` → `resume`),
 * compatibility forms become their ASCII letters (`ﬁ` → `fi`, full-width digits → digits), and
 * only what has no ASCII form (`🚀`, `東`), quotes, backslashes and `%` become `_`.
 */
export function asciiFallback (filename: string): string {
  return filename.normalize('NFKD').replace(/\p{M}/gu, '').replace(/[^\x20-\x7e]|["\\%]/gu, '_')
}

export function attachmentDisposition (filename: string): string {
  const fallback = asciiFallback(filename)
  const header = `attachment; filename="${fallback}"`
  return fallback === filename ? header : `${header}; filename*=UTF-8''${encodeRfc8187(filename)}`
}
