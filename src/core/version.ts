/**
 * dropcode's version (package.json's), read once at start, and the header that carries it.
 * Every answer of the service carries `Dropcode-Version`; an answer without it came from
 * something else (a proxy's own 413 or 502 page, or a URL that is not a dropcode service), and
 * the CLI says so instead of reporting the status as the service's.
 */
import { readFileSync } from 'node:fs'

/** Set by the bundle of the CLI (scripts/bundle-cli.mjs), which has no package.json beside it. */
declare const __DROPCODE_VERSION__: string | undefined

/** package.json sits two levels up from both src/core/ and dist/core/. */
export const VERSION: string = typeof __DROPCODE_VERSION__ === 'string'
  ? __DROPCODE_VERSION__
  : (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version

export { VERSION_HEADER } from '../api/answers.js'
