/**
 * The info page of a code, /d/{code}: name, size and SHA-256 read with HEAD /download/{code},
 * which never counts a download, and a link to /download/{code} for when the person chooses to
 * download. Link previews and second looks therefore cost nothing.
 */
import { $, setText } from './dom.js'
import { dispositionFilename, formatBytes, reprDigestHex } from './format.js'

const CODE = /^[A-Za-z0-9]{6}$/

/** The same words as the download error page: never which of these it was. */
const NOT_AVAILABLE = 'No file with this code: it may have expired, reached its download limit, or been deleted. Check the code with whoever sent it.'

export async function showInfo (code: string): Promise<void> {
  $('info-view').hidden = false
  if (!CODE.test(code)) {
    unavailable()
    return
  }
  let res: Response
  try {
    res = await fetch(`/download/${code}`, { method: 'HEAD', cache: 'no-store' })
  } catch {
    problem('Cannot reach the service', 'Check your connection, then reload this page.')
    return
  }
  if (res.status === 404) return unavailable()
  if (res.status === 429) return problem('Too many attempts', 'Too many codes were tried from your network. Wait a minute, then reload this page.')
  if (!res.ok) return problem('Temporarily unavailable', `The service could not look up the file (${res.status}). Try again in a moment by reloading this page.`)

  const name = dispositionFilename(res.headers.get('content-disposition')) ?? 'file'
  const size = Number(res.headers.get('content-length'))
  document.title = `${name} · dropcode`
  setText('info-title', 'A file is waiting for you')
  setText('info-name', name)
  setText('info-size', Number.isFinite(size) ? `${formatBytes(size)} (${size.toLocaleString('en')} bytes)` : 'unknown')
  setText('info-sha256', reprDigestHex(res.headers.get('repr-digest')) ?? 'not known')
  const left = res.headers.get('dropcode-downloads-left')
  setText('info-left', left === null ? 'not known' : left === '1' ? '1 (the next download is the last)' : left)
  const expires = res.headers.get('dropcode-expires')
  setText('info-expires', expires === null ? 'not known' : formatExpiry(new Date(expires)))
  const link = $<HTMLAnchorElement>('info-download')
  link.href = `/download/${code}`
  link.textContent = `Download ${name}`
  $('info-file').hidden = false
}

/** An expiry for people: the local date and time, and how far off it is. */
function formatExpiry (at: Date): string {
  const hours = Math.max(0, (at.getTime() - Date.now()) / 3_600_000)
  const within = hours < 1 ? `in ${Math.max(1, Math.round(hours * 60))} min` : hours < 48 ? `in ${Math.round(hours)} h` : `in ${Math.round(hours / 24)} days`
  return `${at.toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' })} (${within})`
}

function unavailable (): void {
  problem('File not available', NOT_AVAILABLE)
}

function problem (title: string, message: string): void {
  document.title = `${title} · dropcode`
  setText('info-title', title)
  setText('info-message', message)
}

/** The "received a code?" box on /: a code, or a pasted link, leads to its info page. */
export function initCodeBox (): void {
  $('fetch-box').hidden = false
  const form = $<HTMLFormElement>('fetch-form')
  const input = $<HTMLInputElement>('code-input')
  input.addEventListener('input', () => input.setCustomValidity(''))
  form.addEventListener('submit', e => {
    e.preventDefault()
    // A code, or a pasted link ending in one (…/d/CODE or …/download/CODE).
    const m = /(?:^|\/)([A-Za-z0-9]{6})\/?$/.exec(input.value.trim())
    if (m === null) {
      input.setCustomValidity('Enter the 6 letters or digits of the code.')
      input.reportValidity()
      return
    }
    location.assign(`/d/${m[1]!}`)
  })
}
