/** The result of an upload: the code, the links to share, the file's facts, copy buttons. */
import { $, copyText, setText } from './dom.js'
import { formatBytes, formatHours } from './format.js'
import { drawQr } from './qr.js'
import type { Result } from './upload.js'

/** Fills in and shows the result: code, links, the file's facts; focus goes to its heading. */
export function showResult (r: Result): void {
  const origin = location.origin
  setText('result-code', r.code)
  $<HTMLInputElement>('share-link').value = `${origin}/d/${r.code}`
  drawQr($('result-qr'), `${origin}/d/${r.code}`, `QR code of ${origin}/d/${r.code}`)
  $<HTMLInputElement>('download-link').value = `${origin}/download/${r.code}`
  setText('result-name', r.filename)
  setText('result-size', `${formatBytes(r.size)} (${r.size.toLocaleString('en')} bytes)`)
  setText('result-sha256', r.sha256)
  setText('result-downloads', r.maxDownloads.toLocaleString('en'))
  const expires = new Date(Date.now() + r.expiryHours * 3_600_000)
  setText('result-expires', `after ${formatHours(r.expiryHours)}, about ${expires.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}`)
  $('result-box').hidden = false
  $('result-title').focus()
}

/** The copy buttons of the result; `notice` tells the person what happened. */
export function initCopyButtons (notice: (text: string) => void): void {
  copyButton('copy-code', () => $('result-code'), 'Code', notice)
  copyButton('copy-share', () => $('share-link'), 'Link', notice)
  copyButton('copy-download', () => $('download-link'), 'Download link', notice)
}

function copyButton (buttonId: string, source: () => HTMLElement, what: string, notice: (text: string) => void): void {
  const button = $<HTMLButtonElement>(buttonId)
  const label = button.textContent ?? ''
  button.addEventListener('click', () => {
    const el = source()
    const text = el instanceof HTMLInputElement ? el.value : el.textContent ?? ''
    copyText(text, el).then(ok => {
      notice(ok ? `${what} copied to the clipboard.` : `Copying failed: the ${what.toLowerCase()} is selected, press Ctrl+C (or ⌘C) to copy it.`)
      if (!ok) return
      button.textContent = 'Copied'
      window.setTimeout(() => { button.textContent = label }, 2000)
    })
  })
}
