/**
 * The CLI box on /: the one line that installs the command-line client this service serves
 * (GET /cli/dropcode.mjs) and the file's SHA-256, read from a HEAD (its Repr-Digest), so a
 * person can pin it in a CI job.
 */
import { $, setText } from './dom.js'
import { reprDigestHex } from './format.js'

export async function initCliBox (): Promise<void> {
  const res = await fetch('/cli/dropcode.mjs', { method: 'HEAD', cache: 'no-store' })
  const sha256 = reprDigestHex(res.headers.get('repr-digest'))
  if (!res.ok || sha256 === undefined) return
  setText('cli-command', `curl -fsSL ${location.origin}/cli/dropcode.mjs -o dropcode && node dropcode --help`)
  setText('cli-sha256', sha256)
  $('cli-box').hidden = false
}
