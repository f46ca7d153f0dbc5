/**
 * Workload 6: the peer. The tus reference server for Node (@tus/server + @tus/file-store, its own
 * process) driven by tus-js-client in this process, against dropcode's chunked upload on the fs
 * driver: the same file on disk (the large size, generated once), 8 MiB chunks.
 *
 * Parallelism: tus-js-client uploads one file in parallel only through the protocol's
 * concatenation extension, which @tus/file-store does not offer (its extensions: creation,
 * creation-with-upload, creation-defer-length, termination, expiration), so tus sends its 8 MiB
 * PATCHes one after another. The bar (≥ 1.0) compares dropcode with the same chunk size and the
 * same parallelism, one chunk in flight; dropcode with 4 in flight is shown beside it.
 * Downloads: GET /download/{code} against @tus/server's GET /files/{id}.
 */
import { createReadStream, createWriteStream } from 'node:fs'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import * as tus from 'tus-js-client'
import { startPeer, startService, tempDir } from './backends.js'
import { chunkedUpload } from './chunked-client.js'
import { addRow, alternate, checkBytes, type Context, generated, generatedHash, getHashed, limit, MiB, mibPerSecond, ratio, stat, timed } from './lib.js'

const CHUNK = 8 * MiB

async function tusUpload (endpoint: string, file: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const upload = new tus.Upload(createReadStream(file), {
      endpoint,
      chunkSize: CHUNK,
      retryDelays: [],
      metadata: { filename: 'big.bin', filetype: 'application/octet-stream' },
      onError: reject,
      onSuccess: () => resolve(upload.url!)
    })
    upload.start()
  })
}

export async function benchTus (ctx: Context): Promise<void> {
  const workload = '6 peer: tus'
  const size = ctx.largeMiB * MiB
  const file = path.join(await tempDir('tus-source'), 'big.bin')
  await pipeline(generated(size), createWriteStream(file))
  // Warm-ups on a small file of the same bytes (64 MiB; 8 chunks).
  const warmFile = path.join(path.dirname(file), 'warm.bin')
  const warmSize = 64 * MiB
  await pipeline(generated(warmSize), createWriteStream(warmFile))
  const want = { hash: generatedHash(size), size }
  const server = await startService('fs')
  const peer = await startPeer('tus.ts', [await tempDir('tus-store')])
  try {
    let code = ''
    let tusUrl = ''
    const completes = new Map<number, number[]>()
    const ours = (inFlight: number, warm = false) => async () => {
      const [source, bytes] = warm ? [warmFile, warmSize] : [file, size]
      const r = await chunkedUpload(server.url, {
        chunks: bytes / CHUNK,
        chunkSize: CHUNK,
        inFlight,
        body: i => createReadStream(source, { start: i * CHUNK, end: (i + 1) * CHUNK - 1 }),
        sha256: generatedHash(bytes)
      })
      if (warm) return 0
      code = r.code
      completes.set(inFlight, [...(completes.get(inFlight) ?? []), r.completeSeconds])
      return mibPerSecond(size, r.totalSeconds)
    }
    const theirs = async (warm = false) => {
      const { value, seconds } = await timed(() => tusUpload(`${peer.url}/files/`, warm ? warmFile : file))
      if (warm) return 0
      tusUrl = value
      return mibPerSecond(size, seconds)
    }
    const up = await alternate(ctx.rounds, [
      { name: 'dropcode 1', warmUp: ours(1, true), run: ours(1) },
      { name: 'dropcode 4', run: ours(4) },
      { name: 'tus', warmUp: () => theirs(true), run: () => theirs() }
    ])
    const label = `${ctx.largeMiB} MiB in 8 MiB chunks`
    const a = addRow(ctx, { workload, name: `dropcode fs: chunked upload ${label}, 1 in flight`, unit: 'MiB/s', stat: stat(up.get('dropcode 1')!) })
    const a4 = addRow(ctx, { workload, name: `dropcode fs: chunked upload ${label}, 4 in flight`, unit: 'MiB/s', stat: stat(up.get('dropcode 4')!) })
    for (const n of [1, 4]) {
      const done = addRow(ctx, { workload, name: `dropcode fs: /upload/complete, ${n} in flight`, unit: 's', lowerIsBetter: true, stat: stat(completes.get(n)!), note: 'chunks written in place (chunk_size); the sha256 folded as they arrived' })
      ctx.ratios.push(limit(workload, `chunked fs: /upload/complete of ${label}, ${n} in flight (issue 21)`, done.median, 0.5, 's'))
    }
    const b = addRow(ctx, { workload, name: `@tus/server + file-store, tus-js-client, ${label} (sequential PATCHes)`, unit: 'MiB/s', stat: stat(up.get('tus')!) })
    ctx.ratios.push(ratio(workload, 'chunked upload fs, 1 in flight: dropcode / tus', a, b, 1.0))
    ctx.ratios.push(ratio(workload, 'chunked upload fs, dropcode 4 in flight / tus (1: no concatenation in file-store)', a4, b, 1.0))

    const download = (url: string, what: string) => async () => {
      const { value, seconds } = await timed(() => getHashed(url))
      checkBytes(what, value, want)
      return mibPerSecond(size, seconds)
    }
    const ourDownload = download(`${server.url}/download/${code}`, 'dropcode download (tus workload)')
    const tusDownload = download(tusUrl, '@tus/server download')
    const down = await alternate(ctx.rounds, [
      { name: 'dropcode', warmUp: ourDownload, run: ourDownload },
      { name: 'tus', warmUp: tusDownload, run: tusDownload }
    ])
    const c = addRow(ctx, { workload, name: `dropcode fs: GET /download ${ctx.largeMiB} MiB`, unit: 'MiB/s', stat: stat(down.get('dropcode')!) })
    const d = addRow(ctx, { workload, name: `@tus/server GET /files/{id} ${ctx.largeMiB} MiB`, unit: 'MiB/s', stat: stat(down.get('tus')!) })
    ctx.ratios.push(ratio(workload, 'download fs: dropcode / tus', c, d, 1.0))
  } finally {
    await server.stop()
    await peer.stop()
  }
}
