/**
 * Appendable uploads on S3 (src/blob/s3/appends.ts): what the driver asks of S3. The byte-level
 * behaviour is the contract's (contract.ts appendContract, run by s3-store.test.ts).
 */
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import type { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import type { ChunkReceipt } from '../../src/blob/index.js'
import { createS3BlobStore } from '../../src/blob/s3/store.js'
import { newBlobKey } from '../../src/core/ids.js'
import { recordingClient, type SentCommand } from '../helpers/s3-client.js'
import { startS3 } from '../helpers/s3.js'
import { byteStream, sha256 } from '../helpers/streams.js'

const MiB = 1024 * 1024
const s3 = await startS3()
t.teardown(() => s3.stop())
t.comment(`S3 endpoint: ${s3.kind} (${s3.endpoint})`)

async function open (t: Test) {
  const { client, sent } = recordingClient(s3)
  t.teardown(() => client.destroy())
  const bucket = String(s3.env().S3_BUCKET)
  const store = createS3BlobStore({ client, bucket, prefix: 'files/', partSize: 5 * MiB, queueSize: 2, uploadMemory: 64 * MiB, createBucket: true })
  await store.init()
  const key = newBlobKey()
  const handle = await store.beginChunked(key, { append: true })
  const receipts: ChunkReceipt[] = []
  const seeds: Array<[number, number]> = []
  return {
    store,
    client,
    sent,
    bucket,
    key,
    handle,
    receipts,
    async append (size: number, seed: number, body: Readable = byteStream(size, { seed })) {
      const offset = receipts.reduce((n, r) => n + r.size, 0)
      const { receipt } = await store.appendChunk(key, handle, { body, offset, previous: receipts.at(-1), maxLength: size })
      receipts.push(receipt)
      seeds.push([receipt.size, seed])
      return receipt
    },
    /** Completes, checks the bytes, and that nothing but the object is left. */
    async complete () {
      await store.completeChunked(key, handle, receipts)
      async function * want () { for (const [size, seed] of seeds) yield * byteStream(size, { seed }) }
      t.same(await sha256((await store.get(key)).body), await sha256(want()), 'the object is the appends, byte for byte')
      const objects = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `files/${key}` }))
      t.same((objects.Contents ?? []).map(o => o.Key), [`files/${key}`], 'no tail object left')
      if (s3.strict) t.same((await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? [], [], 'no unfinished multipart upload')
    }
  }
}

const named = (sent: SentCommand[], name: string) => sent.filter(c => c.name === name)

t.test('appends on S3: parts ≥ 5 MiB numbered on across appends, the tail last; completion copies nothing', async t => {
  const up = await open(t)
  // 1 MiB appends accumulate in the tail until it is a part (5 MiB); 13 MiB + a 1 MiB tail
  // is two parts (5 MiB, 9 MiB); the last 2 MiB are the final tail.
  for (let i = 0; i < 6; i++) await up.append(MiB, i + 1)
  await up.append(13 * MiB, 20)
  const last = await up.append(2 * MiB, 21)
  t.match(last, { size: 2 * MiB, append: true, nextPart: 4, tail: { size: 2 * MiB } }, 'the receipt names the next part and the tail')
  await up.complete()
  const parts = named(up.sent, 'UploadPartCommand').map(c => [c.input.PartNumber, Number(c.input.ContentLength)])
  t.same(parts, [[1, 5 * MiB], [2, 5 * MiB], [3, 9 * MiB], [10000, 2 * MiB]], 'parts: numbered on, ≥ 5 MiB but the final tail')
  const complete = named(up.sent, 'CompleteMultipartUploadCommand')
  t.equal(complete.length, 1)
  t.same((complete[0]!.input.MultipartUpload as { Parts: Array<{ PartNumber: number }> }).Parts.map(p => p.PartNumber), [1, 2, 3, 10000])
  t.equal(named(up.sent, 'UploadPartCopyCommand').length, 0, 'no byte copied')
})

t.test('appends on S3: an append of 0 bytes sends nothing to S3', async t => {
  const up = await open(t)
  await up.append(3 * MiB, 1)
  const before = up.sent.length
  const empty = await up.append(0, 2)
  t.equal(up.sent.length, before, 'no request')
  t.same(empty, { ...up.receipts.at(-2), size: 0, parts: [] }, 'it carries the tail and the next part forward')
  await up.append(MiB, 3)
  await up.complete()
})

t.test('appends on S3: an append that S3 fails after a part rejects; the previous receipt stays valid (stray_part_at_completion)', async t => {
  // Ceph RGW refuses a CompleteMultipartUpload that leaves out an uploaded part; the failed
  // append left part 1 behind, which no receipt names.
  const up = await open(t)
  await up.append(MiB, 1)
  let failing = true
  up.client.middlewareStack.add(next => async args => {
    const input = args.input as { PartNumber?: number }
    if (failing && input.PartNumber === 2) throw Object.assign(new Error('injected fault'), { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } })
    return await next(args)
  }, { step: 'initialize', name: 'failPartTwo' })
  const body = byteStream(16 * MiB, { seed: 2 })
  await t.rejects(up.store.appendChunk(up.key, up.handle, { body, offset: MiB, previous: up.receipts.at(-1) }), { code: 'DROPCODE_STORAGE_UNAVAILABLE' })
  t.ok(body.destroyed, 'the body is destroyed')
  failing = false
  await up.append(2 * MiB, 3)
  await up.complete()
  t.ok(named(up.sent, 'UploadPartCopyCommand').length > 0, 'the recorded bytes were copied around the stray part')
})
