/** Small DOM helpers. The page never parses HTML from strings: text goes in as textContent. */

/** The element with this id; the page's HTML has every id the scripts use. */
export function $<T extends HTMLElement = HTMLElement> (id: string): T {
  const el = document.getElementById(id)
  if (el === null) throw new Error(`#${id} is missing from the page`)
  return el as T
}

export function setText (id: string, text: string): void {
  $(id).textContent = text
}

/**
 * Copies `text`: the Clipboard API where the browser offers it (secure contexts), else the
 * selection and execCommand. Either way `source` ends up selected, so a failed copy leaves the
 * text ready for Ctrl+C.
 */
export async function copyText (text: string, source: HTMLElement): Promise<boolean> {
  if (source instanceof HTMLInputElement) source.select()
  else window.getSelection()?.selectAllChildren(source)
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    try {
      return document.execCommand('copy')
    } catch {
      return false
    }
  }
}

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise<void>(resolve => window.setTimeout(resolve, ms))
