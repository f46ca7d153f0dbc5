/**
 * Security headers of the HTML that people see: the web page (routes/web.ts, its assets) and
 * the error page of /download/{code} (plugins/error-handler.ts).
 *
 * The page runs only its own scripts (`script-src 'self'`, no inline code, no eval) and talks
 * only to its own origin (`connect-src 'self'`); DOM sinks that parse HTML are closed by Trusted
 * Types (the page builds its DOM with textContent). Codes appear in URLs (/d/{code}), so no
 * Referer ever leaves the page.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'"
].join('; ')

/** The error page has no script at all: only the page's stylesheet and icon. */
export const ERROR_PAGE_CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "img-src 'self'",
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'"
].join('; ')

/** Headers every page answer carries besides its CSP. */
export const PAGE_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin'
} as const

/** All the security headers of the download error page (plugins/error-handler.ts), built once. */
export const ERROR_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': ERROR_PAGE_CSP,
  'cache-control': 'no-store',
  ...PAGE_HEADERS
} as const
