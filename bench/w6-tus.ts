/**
 * Workload 6 (issue 26): tus-js-client against dropcode's own tus endpoint (`/files/`) and
 * against the tus reference server for Node, @tus/server, each in its own process, on the same
 * storage: on fs the service's fs driver against @tus/file-store; on s3 the service's s3 driver
 * (with Redis) against @tus/s3-store, both on the same throw-away radosgw. The same client, the
 * same options (8 MiB chunks), the same file on disk (the large size, generated once).
 *
 * - one request in flight: `parallelUploads: 1`, 8 MiB PATCHes one after another, on both
 *   sides. Bar ≥ 1.0.
 * - parallel: tus-js-client's `parallelUploads: 4` cuts the file into 4 partial uploads sent at
 *   once and concatenated at the end, which needs the server's `concatenation` extension.
 *   Neither @tus/file-store nor @tus/s3-store offers it (their extensions: creation,
 *   creation-with-upload, creation-defer-length, termination, expiration), so a user of the peer
 *   uploads one request at a time: dropcode with 4 is compared with the peer with 1. Bar ≥ 1.5.
 *   Whether each side concatenates is read from its `OPTIONS /files/` `Tus-Extension`: a peer
 *   that offers it is driven with 4 too (and the row says so); while dropcode does not, the
 *   row is reported as not measured, with the reason, and the rest of the bench runs.
 * - downloads: every upload is fetched back and its SHA-256 compared (dropcode `GET
 *   /download/{code}`, the code from `Dropcode-Code`; the peer's `GET /files/{id}`), then deleted;
 *   the one-in-flight uploads' downloads are reported as rates too. Bar ≥ 1.0.
 * - on fs, dropcode's chunked API (/upload/start, 8 MiB chunks one at a time, /upload/complete)
 *   on the same file: dropcode's other resumable route beside its tus one, and the time of
 *   /upload/complete (issue 21: < 0.5 s).
 */
import { createReadStream, createWriteStream } from 'node:fs'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { DeleteObjectCommand } from '@aws-sdk/client-s3'
import { type Driver, type Peer, s3Client, startPeer, startService, tempDir } from './backends.js'
import { chunkedUpload } from './chunked-client.js'
import { addRow, alternate, checkBytes, type Context, generated, generatedHash, getHashed, limit, MiB, mibPerSecond, notes, ratio, stat, timed } from './lib.js'
import { peerS3Env } from './peers/s3-env.js'
import { tusExtensions, tusUpload } from './tus-client.js'

const CHUNK = 8 * MiB
const PARALLEL = 4
const WARM_MIB = 64

let sources: Promise<{ file: string, warmFile: string }> | undefined
/** The large file and a 64 MiB one of the same bytes for warm-ups, written once per run. */
async function sourceFiles (size: number) {
  sources ??= (async () => {
    const dir = await tempDir('tus-source')
    const file = path.join(dir, 'big.bin')
    const warmFile = path.join(dir, 'warm.bin')
    await pipeline(generated(size), createWriteStream(file))
    await pipeline(generated(WARM_MIB * MiB), createWriteStream(warmFile))
    return { file, warmFile }
  })()
  return await sources
}

/** The peer on `driver`, and how to delete one of its finished uploads (not timed). */
async function startTusPeer (driver: Driver): Promise<{ peer: Peer, store: string, forget: (url: string) => Promise<void> }> {
  if (driver === 'fs') {
    const peer = await startPeer('tus.ts', [await tempDir('tus-store')])
    const forget = async (url: string) => { await fetch(url, { method: 'DELETE', headers: { 'Tus-Resumable': '1.0.0' } }).then(r => r.arrayBuffer()) }
    return { peer, store: '@tus/file-store', forget }
  }
  const { client, bucket, s3 } = await s3Client()
  const peer = await startPeer('tus-s3.ts', [], peerS3Env(s3, bucket))
  // s3-store's termination aborts the multipart upload first, which a completed one no longer
  // has (NoSuchUpload: 404, nothing deleted): the bench deletes its two objects itself.
  const forget = async (url: string) => {
    const id = new URL(url).pathname.split('/').pop()!
    for (const Key of [id, `${id}.info`]) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }))
  }
  return { peer, store: '@tus/s3-store', forget }
}

export async function benchTus (ctx: Context, driver: Driver): Promise<void> {
  const workload = '6 peer: tus'
  const size = ctx.largeMiB * MiB
  const { file, warmFile } = await sourceFiles(size)
  const server = await startService(driver)
  const { peer, store, forget } = await startTusPeer(driver)
  try {
    const ours = await tusExtensions(`${server.url}/files/`)
    const theirs = await tusExtensions(`${peer.url}/files/`)
    const oursParallel = ours.has('concatenation')
    const theirsParallel = theirs.has('concatenation')
    const downloads = { dropcode: [] as number[], peer: [] as number[] }
    const completes: number[] = []

    /** Fetches what an upload stored, compares its SHA-256, deletes it; the download's MiB/s. */
    const verify = async (what: string, url: string, bytes: number, forgetIt: () => Promise<void>) => {
      const { value, seconds } = await timed(() => getHashed(url))
      checkBytes(what, value, { hash: generatedHash(bytes), size: bytes })
      await forgetIt()
      return mibPerSecond(bytes, seconds)
    }
    const dropcodeTus = (parallelUploads: number, warm = false) => async () => {
      const [source, bytes] = warm ? [warmFile, WARM_MIB * MiB] : [file, size]
      const r = await tusUpload(`${server.url}/files/`, source, { chunkSize: CHUNK, parallelUploads })
      if (r.code === undefined) throw new Error(`dropcode ${driver}: no Dropcode-Code after a tus upload (parallelUploads ${parallelUploads})`)
      const forgetIt = async () => { await fetch(`${server.url}/delete/${r.code!}`, { method: 'DELETE' }).then(res => res.arrayBuffer()) }
      const down = await verify(`dropcode ${driver} tus upload (parallelUploads ${parallelUploads}), downloaded`, `${server.url}/download/${r.code}`, bytes, forgetIt)
      if (!warm && parallelUploads === 1) downloads.dropcode.push(down)
      return mibPerSecond(bytes, r.seconds)
    }
    const peerTus = (parallelUploads: number, warm = false) => async () => {
      const [source, bytes] = warm ? [warmFile, WARM_MIB * MiB] : [file, size]
      const r = await tusUpload(`${peer.url}/files/`, source, { chunkSize: CHUNK, parallelUploads })
      const down = await verify(`@tus/server + ${store} upload (parallelUploads ${parallelUploads}), downloaded`, r.url, bytes, () => forget(r.url))
      if (!warm && parallelUploads === 1) downloads.peer.push(down)
      return mibPerSecond(bytes, r.seconds)
    }
    const chunked = (warm = false) => async () => {
      const [source, bytes] = warm ? [warmFile, WARM_MIB * MiB] : [file, size]
      const r = await chunkedUpload(server.url, {
        chunks: bytes / CHUNK,
        chunkSize: CHUNK,
        inFlight: 1,
        body: i => createReadStream(source, { start: i * CHUNK, end: (i + 1) * CHUNK - 1 }),
        sha256: generatedHash(bytes)
      })
      const forgetIt = async () => { await fetch(`${server.url}/delete/${r.code}`, { method: 'DELETE' }).then(res => res.arrayBuffer()) }
      await verify(`dropcode ${driver} chunked upload, downloaded`, `${server.url}/download/${r.code}`, bytes, forgetIt)
      if (!warm) completes.push(r.completeSeconds)
      return mibPerSecond(bytes, r.totalSeconds)
    }

    const up = await alternate(ctx.rounds, [
      { name: 'dropcode 1', warmUp: dropcodeTus(1, true), run: dropcodeTus(1) },
      ...(oursParallel ? [{ name: 'dropcode parallel', warmUp: dropcodeTus(PARALLEL, true), run: dropcodeTus(PARALLEL) }] : []),
      { name: 'peer 1', warmUp: peerTus(1, true), run: peerTus(1) },
      ...(theirsParallel ? [{ name: 'peer parallel', warmUp: peerTus(PARALLEL, true), run: peerTus(PARALLEL) }] : []),
      ...(driver === 'fs' ? [{ name: 'chunked', warmUp: chunked(true), run: chunked() }] : [])
    ])

    const label = `${ctx.largeMiB} MiB in 8 MiB chunks`
    const peerName = `@tus/server + ${store}`
    const a = addRow(ctx, { workload, name: `dropcode ${driver}: tus-js-client to /files/, ${label}, one request in flight`, unit: 'MiB/s', stat: stat(up.get('dropcode 1')!) })
    const b = addRow(ctx, { workload, name: `${peerName}: tus-js-client, ${label}, one request in flight`, unit: 'MiB/s', stat: stat(up.get('peer 1')!) })
    ctx.ratios.push(ratio(workload, `tus ${driver}, one request in flight: dropcode / ${peerName}`, a, b, 1.0))

    // The peer's best: with concatenation, its own parallelUploads; without, one request at a time.
    const best = theirsParallel
      ? addRow(ctx, { workload, name: `${peerName}: tus-js-client, ${label}, parallelUploads: ${PARALLEL}`, unit: 'MiB/s', stat: stat(up.get('peer parallel')!) })
      : b
    const parallelName = theirsParallel
      ? `tus ${driver}: dropcode parallelUploads ${PARALLEL} / ${peerName} parallelUploads ${PARALLEL} (both concatenate)`
      : `tus ${driver}: dropcode parallelUploads ${PARALLEL} / ${peerName} one request in flight (${store} cannot concatenate)`
    if (oursParallel) {
      const p = addRow(ctx, { workload, name: `dropcode ${driver}: tus-js-client to /files/, ${label}, parallelUploads: ${PARALLEL} (concatenation)`, unit: 'MiB/s', stat: stat(up.get('dropcode parallel')!) })
      ctx.ratios.push(ratio(workload, parallelName, p, best, 1.5))
    } else {
      const why = `dropcode does not offer concatenation yet (its OPTIONS /files/ Tus-Extension: ${[...ours].join(',')})`
      addRow(ctx, { workload, name: `dropcode ${driver}: tus-js-client to /files/, ${label}, parallelUploads: ${PARALLEL}`, unit: 'MiB/s', stat: stat([]), note: `not measured: ${why}` })
      ctx.ratios.push({ workload, name: parallelName, value: NaN, bar: 1.5, kind: 'min', met: false, unmeasured: why })
      notes.push(`6 tus ${driver}: parallelUploads ${PARALLEL} not measured: ${why}`)
    }

    const c = addRow(ctx, { workload, name: `dropcode ${driver}: GET /download ${ctx.largeMiB} MiB (what tus uploaded)`, unit: 'MiB/s', stat: stat(downloads.dropcode) })
    const d = addRow(ctx, { workload, name: `${peerName}: GET /files/{id} ${ctx.largeMiB} MiB`, unit: 'MiB/s', stat: stat(downloads.peer) })
    ctx.ratios.push(ratio(workload, `download ${driver}: dropcode / ${peerName}`, c, d, 1.0))

    if (driver === 'fs') {
      const e = addRow(ctx, { workload, name: `dropcode fs: chunked API, ${label}, one request in flight (beside tus)`, unit: 'MiB/s', stat: stat(up.get('chunked')!) })
      ctx.ratios.push({ ...ratio(workload, 'fs, one request in flight: dropcode tus / dropcode chunked API (informative)', a, e, 1.0) })
      const done = addRow(ctx, { workload, name: 'dropcode fs: /upload/complete, chunked API, one request in flight', unit: 's', lowerIsBetter: true, stat: stat(completes), note: 'chunks written in place (chunk_size); the sha256 folded as they arrived' })
      ctx.ratios.push(limit(workload, `chunked fs: /upload/complete of ${label}, one in flight (issue 21)`, done.median, 0.5, 's'))
    }
  } finally {
    await server.stop()
    await peer.stop()
  }
}
