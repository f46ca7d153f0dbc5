/**
 * The script of a team's own page on another origin that uploads to dropcode with Uppy
 * (@uppy/core + @uppy/tus), as a team would write it. uppy.test.ts bundles it with esbuild
 * and serves it; it runs in Chromium, never in Node. It uploads the bytes its own origin serves
 * at /payload.bin and shows the code on the page: `#code` from the answer to the PATCH that
 * completed the upload, `#head-code` from a HEAD of the upload afterwards (README's recipe),
 * `#error` what went wrong; `#state` ends as `done` or `failed`.
 */
import Uppy, { type Meta } from '@uppy/core'
import Tus, { type TusBody } from '@uppy/tus'

// Fixed by the bundler (uppy.test.ts): the API's origin, the key, the file's name, the tus chunk size (bytes).
declare const __API__: string
declare const __KEY__: string
declare const __FILE_NAME__: string
declare const __CHUNK_SIZE__: number

const show = (id: string, text: string) => { document.getElementById(id)!.textContent = text }

async function main () {
  const payload = await (await fetch('/payload.bin')).blob()
  const uppy = new Uppy<Meta, TusBody>({ autoProceed: false })
  uppy.use(Tus, {
    endpoint: `${__API__}/files/`,
    headers: { 'X-Client-Key': __KEY__ },
    chunkSize: __CHUNK_SIZE__,
    retryDelays: [] // a failure shows at once, for the test to report
  })
  uppy.on('upload-success', (_file, response) => {
    // The completing PATCH's XMLHttpRequest. Read it here: when this event returns, @uppy/tus
    // aborts its tus upload, and abort() on a finished XMLHttpRequest drops its response headers.
    show('code', response.body?.xhr.getResponseHeader('Dropcode-Code') ?? '')
    show('upload-url', response.uploadURL ?? '')
  })
  uppy.addFile({ name: __FILE_NAME__, type: 'application/octet-stream', data: payload, meta: { max_downloads: '2' } })
  const result = await uppy.upload()
  if (result === undefined || (result.failed ?? []).length > 0 || result.successful?.length !== 1) {
    throw new Error(`upload failed: ${(result?.failed ?? []).map(f => String(f.error)).join('; ')}`)
  }
  const uploadUrl = result.successful[0]!.uploadURL!
  const head = await fetch(uploadUrl, { method: 'HEAD', headers: { 'Tus-Resumable': '1.0.0', 'X-Client-Key': __KEY__ } })
  show('head-code', head.headers.get('Dropcode-Code') ?? '')
}

main().then(() => show('state', 'done'), (err: unknown) => {
  show('error', String(err))
  show('state', 'failed')
})
