/** The small HTML page download failures answer with (the interface wants HTML there). */
const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

const TITLES: Record<number, string> = {
  404: 'File not found',
  429: 'Too many attempts',
  503: 'Temporarily unavailable'
}

/** Renders the page; `message` is escaped, and nothing from the request is ever passed in. */
export function errorPage (status: number, message: string): string {
  const title = TITLES[status] ?? 'Something went wrong'
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)} · dropcode</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}p{color:#555}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(message)}</p>
</body>
</html>
`
}
