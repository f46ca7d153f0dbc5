/**
 * tus-js-client (the client Uppy uses) against dropcode's tus endpoint, unchanged: it sends the
 * key as a custom header, the settings as metadata, reads the code from Dropcode-Code, and
 * resumes an upload it aborted from where the server says it stands.
 */
import t from 'tap'
import * as tus from 'tus-js-client'
import { loadConfig } from '../../src/config.js'
import { API_KEY, startApp, testEnv } from '../helpers/app.js'
import { bytes, sha256Of } from '../helpers/streams.js'

const MiB = 1024 * 1024

async function download (url: string, code: string) {
  const res = await fetch(`${url}/download/${code}`)
  return { status: res.status, data: Buffer.from(await res.arrayBuffer()), disposition: res.headers.get('content-disposition') }
}

/** Runs one tus-js-client upload to its end; resolves with its last response's Dropcode-Code. */
function run (data: Buffer, options: tus.UploadOptions, during?: (upload: tus.Upload, sent: number) => void): Promise<{ code: string, upload: tus.Upload } | { aborted: tus.Upload }> {
  return new Promise((resolve, reject) => {
    const upload: tus.Upload = new tus.Upload(data, {
      retryDelays: [],
      ...options,
      onProgress: sent => { during?.(upload, sent) },
      onSuccess: ({ lastResponse }) => { resolve({ code: lastResponse.getHeader('Dropcode-Code') ?? '', upload }) },
      onError: reject
    })
    if (during !== undefined) {
      const abort = upload.abort.bind(upload)
      upload.abort = async (terminate?: boolean) => { await abort(terminate); resolve({ aborted: upload }) }
    }
    upload.start()
  })
}

t.test('tus-js-client uploads with the key header and metadata; the code comes back in Dropcode-Code', async t => {
  const { url } = await startApp(t, loadConfig(testEnv(t, 'fs+local', {})))
  const data = bytes(3 * MiB + 7, 21)
  const done = await run(data, {
    endpoint: `${url}/files/`,
    headers: { 'X-Client-Key': API_KEY },
    metadata: { filename: 'build.tar.gz', max_downloads: '3' },
    chunkSize: MiB
  })
  if (!('code' in done)) throw new Error('aborted')
  t.match(done.code, /^[A-Za-z0-9]{6}$/)
  const got = await download(url, done.code)
  t.equal(sha256Of(got.data), sha256Of(data), 'byte for byte')
  t.match(got.disposition, /build\.tar\.gz/)
})

t.test('tus-js-client resumes an upload it aborted midway from the offset the server reports', async t => {
  const { url } = await startApp(t, loadConfig(testEnv(t, 'fs+local', {})))
  const data = bytes(4 * MiB, 22)
  const options = { endpoint: `${url}/files/`, headers: { 'X-Client-Key': API_KEY }, metadata: { filename: 'resumed.bin' }, chunkSize: 512 * 1024 }
  let aborting = false
  const first = await run(data, options, (upload, sent) => {
    if (!aborting && sent >= 1.5 * MiB) { aborting = true; upload.abort().catch(() => {}) }
  })
  if (!('aborted' in first)) throw new Error('the upload was not aborted')
  const uploadUrl = first.aborted.url!
  const stands = await fetch(uploadUrl, { method: 'HEAD', headers: { 'tus-resumable': '1.0.0', 'x-client-key': API_KEY } })
  const offset = Number(stands.headers.get('upload-offset'))
  t.ok(offset >= MiB && offset < data.length, `the server kept what arrived (${offset} bytes)`)
  let resentFrom = -1
  const second = await run(data, { ...options, uploadUrl, onUploadUrlAvailable: () => {}, onChunkComplete: (_size, accepted) => { if (resentFrom < 0) resentFrom = accepted } })
  if (!('code' in second)) throw new Error('aborted')
  t.ok(resentFrom > offset, 'the client resumed after the stored bytes, not from the start')
  t.equal(sha256Of((await download(url, second.code)).data), sha256Of(data))
})

t.test('tus-js-client with parallelUploads: 4 uploads through concatenation; the code comes back on the final', async t => {
  const { url } = await startApp(t, loadConfig(testEnv(t, 'fs+local', {})))
  const data = bytes(6 * MiB + 3, 23)
  const done = await run(data, {
    endpoint: `${url}/files/`,
    headers: { 'X-Client-Key': API_KEY },
    metadata: { filename: 'parallel.bin' },
    parallelUploads: 4
  })
  if (!('code' in done)) throw new Error('aborted')
  t.match(done.code, /^[A-Za-z0-9]{6}$/)
  t.equal(sha256Of((await download(url, done.code)).data), sha256Of(data), 'byte for byte')
})

for (const protocol of ['ietf-draft-03', 'ietf-draft-05'] as const) {
  t.test(`tus-js-client with protocol '${protocol}' (the IETF draft, Upload-Draft-Interop-Version ${protocol === 'ietf-draft-03' ? 5 : 6}) uploads in chunks; the code comes back in Dropcode-Code`, async t => {
    const { url } = await startApp(t, loadConfig(testEnv(t, 'fs+local', {})))
    const data = bytes(3 * MiB + 9, protocol === 'ietf-draft-03' ? 24 : 25)
    const sent: string[] = []
    // (tus-js-client 4.3.1's types do not list `protocol`; its code reads it: lib/upload.js.)
    const options: tus.UploadOptions & { protocol: string } = {
      endpoint: `${url}/files/`,
      protocol,
      headers: { 'X-Client-Key': API_KEY },
      metadata: { filename: `${protocol}.bin` },
      chunkSize: MiB,
      onBeforeRequest: req => { sent.push(`${req.getMethod()} ${String(req.getHeader('Upload-Draft-Interop-Version'))} ${String(req.getHeader('Upload-Complete'))}`) }
    }
    const done = await run(data, options)
    if (!('code' in done)) throw new Error('aborted')
    t.match(done.code, /^[A-Za-z0-9]{6}$/)
    const version = protocol === 'ietf-draft-03' ? '5' : '6'
    t.same(sent, [`POST ${version} ?0`, `PATCH ${version} ?0`, `PATCH ${version} ?0`, `PATCH ${version} ?0`, `PATCH ${version} ?1`], 'the draft\'s requests, not tus\'s')
    const got = await download(url, done.code)
    t.equal(sha256Of(got.data), sha256Of(data), 'byte for byte')
    t.match(got.disposition, new RegExp(`${protocol}\\.bin`))
  })
}
