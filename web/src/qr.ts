/**
 * A QR code of the code's page (its /d/ link) beside the result, so the file can go from a desk
 * to a phone without typing. Drawn here, in the page (uqr encodes; the SVG is built as DOM
 * nodes, no markup parsed): no request leaves the page for it.
 */
import { encode } from './vendor/uqr.js'

const SVG = 'http://www.w3.org/2000/svg'

/** Draws `text` as a QR code into `into` (replacing what was there), labelled for screen readers. */
export function drawQr (into: HTMLElement, text: string, label: string): void {
  const qr = encode(text, { ecc: 'M', border: 2 })
  const svg = document.createElementNS(SVG, 'svg')
  svg.setAttribute('viewBox', `0 0 ${qr.size} ${qr.size}`)
  svg.setAttribute('role', 'img')
  svg.setAttribute('aria-label', label)
  svg.setAttribute('shape-rendering', 'crispEdges')
  const background = document.createElementNS(SVG, 'rect')
  background.setAttribute('width', String(qr.size))
  background.setAttribute('height', String(qr.size))
  background.setAttribute('fill', '#fff')
  const modules = document.createElementNS(SVG, 'path')
  let d = ''
  qr.data.forEach((row, y) => row.forEach((dark, x) => { if (dark) d += `M${x},${y}h1v1h-1z` }))
  modules.setAttribute('d', d)
  modules.setAttribute('fill', '#000')
  svg.append(background, modules)
  into.replaceChildren(svg)
}
