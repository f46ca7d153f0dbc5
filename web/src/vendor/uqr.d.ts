/**
 * The part of uqr (npm `uqr`, MIT: QR encoding, no dependencies) the page uses. web/build.mjs
 * copies the package's ES module to assets/vendor/uqr.js, which the compiled page imports.
 */
export interface QrCode {
  /** Modules per side. */
  size: number
  /** Rows of modules; true: dark. */
  data: boolean[][]
}
export function encode (text: string, options?: { ecc?: 'L' | 'M' | 'Q' | 'H', border?: number }): QrCode
