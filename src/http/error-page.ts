/**
 * The small HTML page download failures answer with (the interface wants HTML there). It shares
 * the web page's look: the same stylesheet and header (served under /assets/ by routes/web.ts),
 * no script, and a link back to the page. A 404 says only that the file is not available, the
 * same words whether the code never existed, expired or was used up.
 */
const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

const TITLES: Record<number, string> = {
  404: 'File not available',
  416: 'Cannot resume this download',
  429: 'Too many attempts',
  503: 'Temporarily unavailable'
}

/** Pages rendered so far, by status and message (4xx only: a 5xx page names its request id). */
const rendered = new Map<string, string>()
/** Distinct 4xx pages kept: the catalogue's messages, and 429's with each Retry-After. */
const MAX_RENDERED = 128

/**
 * The page; `message` is escaped, and nothing from the request is ever passed in. A 4xx page is
 * rendered once and then reused: a guessed code's 404 is the same page every time (issue 21).
 */
export function errorPage (status: number, message: string): string {
  if (status >= 500) return render(status, message)
  const key = `${status} ${message}`
  let page = rendered.get(key)
  if (page === undefined) {
    page = render(status, message)
    if (rendered.size < MAX_RENDERED) rendered.set(key, page)
  }
  return page
}

function render (status: number, message: string): string {
  const title = TITLES[status] ?? 'Something went wrong'
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)} · dropcode</title>
<link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/style.css">
</head>
<body>
<header class="site"><a class="brand" href="/"><img src="/assets/icon.svg" alt="" width="28" height="28">dropcode</a></header>
<main id="main">
<section class="card error-page" aria-labelledby="error-title">
<h1 id="error-title">${escapeHtml(title)}</h1>
<p>${escapeHtml(message)}</p>
<p><a class="button" href="/">Go to the dropcode page</a></p>
</section>
</main>
</body>
</html>
`
}
