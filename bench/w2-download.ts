/**
 * Workload 2: download of the large file stored by workload 1 (GET /download/{code}, hashed as it
 * streams) against the same bytes without dropcode: on S3 a direct GetObject stream, on the
 * filesystem a bare node:http server answering fs.createReadStream. Every body is hashed on
 * both sides and compared with what was sent.
 */
import { createHash } from 'node:crypto'
import { GetObjectCommand } from '@aws-sdk/client-s3'
import { startPeer } from './backends.js'
import {
  addRow, alternate, checkBytes, type Context, generatedHash, getHashed, memoryOf, MiB, mibPerSecond, peakRssDuring, ratio, stat, timed
} from './lib.js'
import { peerS3Env } from './peers/s3-env.js'
import type { Stored } from './w1-upload.js'

export async function benchDownload (ctx: Context, stored: Stored): Promise<void> {
  const { server, size, code, driver } = stored
  const want = { hash: generatedHash(size), size }
  const workload = '2 download'
  const label = `${ctx.largeMiB} MiB`
  const peaks: number[] = []

  const ours = {
    name: 'dropcode',
    run: async () => {
      const before = memoryOf(server.pid)!.rss
      const { value, seconds } = await timed(() => peakRssDuring(server.pid, () => getHashed(`${server.url}/download/${code}`)))
      peaks.push((value.peak - before) / MiB)
      checkBytes(`dropcode ${driver} download`, value.value, want)
      return mibPerSecond(size, seconds)
    }
  }
  let theirs: { name: string, run: () => Promise<number> }
  let baselineName: string
  let relay: { name: string, run: () => Promise<number> } | undefined
  if (stored.s3 !== undefined) {
    const { client, bucket, key, s3 } = stored.s3
    // A third contender: a bare node:http relay of GetObject, the cost any relay pays here.
    const peer = await startPeer('bare.ts', ['relay'], peerS3Env(s3, bucket))
    relay = {
      name: 'relay',
      run: async () => mibPerSecond(size, (await timed(async () => {
        checkBytes('bare relay download', await getHashed(`${peer.url}/r/${key}`), want)
      })).seconds)
    }
    baselineName = 'GetObject stream straight from S3'
    theirs = {
      name: 'baseline',
      run: async () => mibPerSecond(size, (await timed(async () => {
        const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
        const hash = createHash('sha256')
        let n = 0
        for await (const c of res.Body as AsyncIterable<Buffer>) { hash.update(c); n += c.length }
        checkBytes('GetObject', { hash: hash.digest('hex'), size: n }, want)
      })).seconds)
    }
  } else {
    baselineName = 'bare node:http answering fs.createReadStream'
    theirs = {
      name: 'baseline',
      run: async () => mibPerSecond(size, (await timed(async () => {
        checkBytes('bare download', await getHashed(stored.baselineUrl!), want)
      })).seconds)
    }
  }
  // Warm-up: one download each (also fills the page cache on fs for both sides alike).
  const contenders = [{ ...ours, warmUp: () => ours.run() }, { ...theirs, warmUp: () => theirs.run() }]
  if (relay !== undefined) contenders.push({ ...relay, warmUp: () => relay.run() })
  const samples = await alternate(ctx.rounds, contenders)
  const a = addRow(ctx, { workload, name: `dropcode ${driver}: GET /download ${label}`, unit: 'MiB/s', stat: stat(samples.get('dropcode')!), extra: { peakRssGrowthMiB: peaks } })
  const b = addRow(ctx, { workload, name: `${baselineName} ${label}`, unit: 'MiB/s', stat: stat(samples.get('baseline')!) })
  ctx.ratios.push(ratio(workload, `download ${driver}: dropcode / ${driver === 's3' ? 'GetObject' : 'bare node:http'}`, a, b, 0.90))
  if (relay !== undefined) {
    const c = addRow(ctx, { workload, name: `bare node:http relaying a GetObject stream ${label}`, unit: 'MiB/s', stat: stat(samples.get('relay')!) })
    ctx.ratios.push(ratio(workload, 'download s3: bare relay / GetObject (the cost of relaying, informative)', c, b, 0.90))
    ctx.ratios.push(ratio(workload, 'download s3: dropcode / bare relay (bar set by issue 21)', a, c, 1.3))
  }
}
