import { CreateMultipartUploadCommand, HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { createS3BlobStore } from '../../src/blob/s3/store.js'
import { newBlobKey } from '../../src/core/ids.js'
import { recordingClient, type SentCommand } from '../helpers/s3-client.js'
import { startS3 } from '../helpers/s3.js'
import { byteStream } from '../helpers/streams.js'
import { appendContract, blobStoreContract, chunkedContract, chunkedRoundTrip, layoutCell } from './contract.js'

const MiB = 1024 * 1024
const s3 = await startS3()
t.teardown(() => s3.stop())
t.comment(`S3 endpoint: ${s3.kind} (${s3.endpoint})`)

function open (t: Test, over: { prefix?: string, createBucket?: boolean, bucket?: string, client?: S3Client } = {}) {
  const rec = recordingClient(s3)
  const client = over.client ?? rec.client
  t.teardown(() => { client.destroy(); rec.client.destroy() })
  const bucket = over.bucket ?? String(s3.env().S3_BUCKET)
  const store = createS3BlobStore({ client, bucket, prefix: over.prefix ?? 'files/', partSize: 5 * MiB, queueSize: 2, uploadMemory: 64 * MiB, createBucket: over.createBucket ?? true })
  return { store, client, sent: rec.sent, bucket }
}

const opened = new Map<string, ReturnType<typeof open>>()

const openContract = async (t: Test) => {
  const o = open(t)
  await o.store.init()
  opened.set(t.fullname, o)
  return o.store
}
const options = {
  largeSize: 12 * MiB + 3,
  async assertNothingLeft (t: Test, key: string) {
    const { client, bucket } = opened.get(t.fullname)!
    const objects = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `files/${key}` }))
    t.same((objects.Contents ?? []).map(o => o.Key), [], 'no object and no chunk object')
    if (!s3.strict) return t.comment('s3rver: unfinished multipart uploads cannot be listed')
    const list = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }))
    t.same(list.Uploads ?? [], [], 'no unfinished multipart upload')
  }
}
blobStoreContract(t, openContract, options)
chunkedContract(t, openContract, options)
appendContract(t, openContract, {
  ...options,
  // Another instance: a store over the same bucket with an S3 client of its own.
  openAgain: async (t: Test) => open(t, { bucket: opened.get(t.fullname)!.bucket }).store
})

/** Part sizes of every CompleteMultipartUpload sent, checked against the UploadParts sent before it. */
function completedPartSizes (sent: SentCommand[]) {
  const sizes = new Map<string, number>()
  const out: number[][] = []
  for (const c of sent) {
    if (c.name === 'UploadPartCommand') sizes.set(`${String(c.input.UploadId)}#${String(c.input.PartNumber)}`, Number(c.input.ContentLength ?? (c.input.Body as { byteLength?: number })?.byteLength))
    if (c.name === 'CompleteMultipartUploadCommand') {
      const parts = (c.input.MultipartUpload as { Parts: Array<{ PartNumber: number }> }).Parts
      out.push(parts.map(p => sizes.get(`${String(c.input.UploadId)}#${p.PartNumber}`)!))
    }
  }
  return out
}

t.test('chunked on S3: S3 never gets a non-final part under 5 MiB, whatever the chunk size', async t => {
  for (const [name, sizes] of [['1 MiB chunks', [MiB, MiB, MiB, MiB, MiB, MiB, 500]], ['6 MiB chunks', [6 * MiB, 6 * MiB, 100]], ['20 MiB chunks', [20 * MiB, 7 * MiB]], ['5 MiB exactly', [5 * MiB, 5 * MiB, 5 * MiB]]] as const) {
    const { store, sent } = open(t)
    await store.init()
    const r = await chunkedRoundTrip(store, [...sizes], { order: [...sizes.keys()].reverse(), parallel: true })
    t.same(r.got, r.want, `${name}: bytes`)
    for (const parts of completedPartSizes(sent)) {
      t.ok(parts.slice(0, -1).every(p => p >= 5 * MiB), `${name}: non-final parts ${parts.join(',')} are all ≥ 5 MiB`)
      t.same(parts.map((_, i) => i), [...parts.keys()], 'ascending')
    }
  }
})

t.test('chunked on S3: chunks ≥ 5 MiB complete without copying a byte', async t => {
  const { store, sent } = open(t)
  await store.init()
  const r = await chunkedRoundTrip(store, [6 * MiB, 6 * MiB, 2 * MiB], { order: [0, 1, 2] })
  t.same(r.got, r.want)
  const names = sent.map(c => c.name)
  t.equal(names.filter(n => n === 'UploadPartCommand').length, 3, 'one part per chunk')
  t.notOk(names.includes('GetObjectCommand') && names.indexOf('GetObjectCommand') < names.indexOf('CompleteMultipartUploadCommand'), 'nothing read back before completing')
  t.equal(names.filter(n => n === 'PutObjectCommand').length, 0, 'no temporary objects')
  const partNumbers = sent.filter(c => c.name === 'UploadPartCommand').map(c => c.input.PartNumber)
  t.same(partNumbers, [1, 3334, 6667], 'chunk i uses the part numbers reserved for it')
})

t.test('chunked on S3: large chunks are cut into part-size pieces; memory stays bounded', async t => {
  const { store, sent } = open(t)
  await store.init()
  const r = await chunkedRoundTrip(store, [23 * MiB, 1000])
  t.same(r.got, r.want)
  const pieces = sent.filter(c => c.name === 'UploadPartCommand').map(c => Number(c.input.ContentLength))
  t.same(pieces, [5 * MiB, 5 * MiB, 5 * MiB, 8 * MiB, 1000], 'pieces of partSize, the held-back tail ≥ 5 MiB')
})

t.test('chunked on S3: a small non-final chunk in a large-chunk session is refused', async t => {
  const { store } = open(t)
  await store.init()
  const key = newBlobKey()
  const handle = await store.beginChunked(key)
  const settleLayout = layoutCell()
  await store.putChunk(key, handle, { index: 0, total: 3, body: byteStream(6 * MiB), settleLayout })
  await t.rejects(store.putChunk(key, handle, { index: 1, total: 3, body: byteStream(MiB), settleLayout }), { code: 'DROPCODE_CHUNK_TOO_SMALL', statusCode: 400 })
  await store.purge(key)
})

t.test('chunked on S3: with many chunks a chunk is limited to its reserved part numbers', async t => {
  const { store } = open(t)
  await store.init()
  const key = newBlobKey()
  const handle = await store.beginChunked(key)
  await t.rejects(store.putChunk(key, handle, { index: 0, total: 10_000, body: byteStream(11 * MiB), settleLayout: layoutCell() }), { code: 'DROPCODE_CHUNK_TOO_LARGE', statusCode: 413 })
  await store.purge(key)
})

t.test('large bodies go up in parts of exactly partSize, at most queueSize at once', async t => {
  const { store, sent } = open(t)
  await store.init()
  await store.put(newBlobKey(), byteStream(12 * MiB + 3))
  const parts = sent.filter(c => c.name === 'UploadPartCommand')
  // Bodies are streams over the pool's slabs: the declared lengths are the part sizes.
  t.same(parts.map(p => Number(p.input.ContentLength)), [5 * MiB, 5 * MiB, 2 * MiB + 3])
  t.same(parts.map(p => p.input.PartNumber), [1, 2, 3])
  t.equal(sent.filter(c => c.name === 'CompleteMultipartUploadCommand').length, 1)
})

t.test('small bodies are one PutObject', async t => {
  const { store, sent } = open(t)
  await store.init()
  await store.put(newBlobKey(), Readable.from([Buffer.from('tiny')]))
  t.same(sent.filter(c => /Upload|Put/.test(c.name)).map(c => c.name), ['PutObjectCommand'])
})

t.test('objects live under the prefix', async t => {
  const { store, client, bucket } = open(t, { prefix: 'a/b/' })
  await store.init()
  const key = newBlobKey()
  await store.put(key, Readable.from([Buffer.from('x')]))
  const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `a/b/${key}` }))
  t.equal(head.ContentLength, 1)
})

t.test('purge aborts an unfinished multipart upload of the key', { skip: s3.strict ? false : 's3rver cannot list or abort multipart uploads' }, async t => {
  const { store, client, bucket } = open(t)
  await store.init()
  const key = newBlobKey()
  await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `files/${key}` }))
  const other = newBlobKey()
  await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `files/${other}` }))
  await store.purge(key)
  const list = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }))
  t.same((list.Uploads ?? []).map(u => u.Key), [`files/${other}`], 'only the purged key\'s upload is aborted')
})

t.test('init: creates a missing bucket, or names S3_CREATE_BUCKET when not allowed to', async t => {
  const bucket = String(s3.env().S3_BUCKET)
  const refused = open(t, { bucket, createBucket: false })
  await t.rejects(refused.store.init(), { name: 'StartupError', message: /does not exist \(S3_BUCKET\)/, hint: /S3_CREATE_BUCKET=true/ })
  const allowed = open(t, { bucket })
  await allowed.store.init()
  await t.resolves(allowed.store.ping())
})

t.test('init: instances starting at once on a missing bucket all start (bucket_create_race)', async t => {
  // Found with two server processes started together: the loser of the CreateBucket race got
  // BucketAlreadyExists from s3rver and refused to start, though the bucket was there for it.
  for (let round = 1; round <= 5; round++) {
    const bucket = String(s3.env().S3_BUCKET)
    const stores = Array.from({ length: 4 }, () => open(t, { bucket }).store)
    const results = await Promise.allSettled(stores.map(s => s.init()))
    t.same(results.map(r => r.status === 'rejected' ? String((r.reason as Error).message) : 'started'), ['started', 'started', 'started', 'started'], `round ${round}`)
  }
})

t.test('wrong credentials: ping answers STORAGE_UNAVAILABLE', { skip: s3.strict ? false : 's3rver accepts any signature' }, async t => {
  const { client } = recordingClient(s3, { credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: 'wrong' } })
  const { store } = open(t, { client })
  await t.rejects(store.ping(), { code: 'DROPCODE_STORAGE_UNAVAILABLE' })
})
