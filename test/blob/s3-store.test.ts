import { CreateMultipartUploadCommand, HeadObjectCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { createS3BlobStore } from '../../src/blob/s3-store.js'
import { newBlobKey } from '../../src/ids.js'
import { recordingClient } from '../helpers/s3-client.js'
import { startS3 } from '../helpers/s3.js'
import { byteStream } from '../helpers/streams.js'
import { blobStoreContract } from './contract.js'

const MiB = 1024 * 1024
const s3 = await startS3()
t.teardown(() => s3.stop())
t.comment(`S3 endpoint: ${s3.kind} (${s3.endpoint})`)

function open (t: Test, over: { prefix?: string, createBucket?: boolean, bucket?: string, client?: S3Client } = {}) {
  const rec = recordingClient(s3)
  const client = over.client ?? rec.client
  t.teardown(() => { client.destroy(); rec.client.destroy() })
  const bucket = over.bucket ?? String(s3.env().S3_BUCKET)
  const store = createS3BlobStore({ client, bucket, prefix: over.prefix ?? 'files/', partSize: 5 * MiB, queueSize: 2, createBucket: over.createBucket ?? true })
  return { store, client, sent: rec.sent, bucket }
}

const opened = new Map<string, ReturnType<typeof open>>()

blobStoreContract(t, async t => {
  const o = open(t)
  await o.store.init()
  opened.set(t.fullname, o)
  return o.store
}, {
  largeSize: 12 * MiB + 3,
  async assertNothingLeft (t, key) {
    const { client, bucket } = opened.get(t.fullname)!
    const status = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `files/${key}` }))
      .then(() => 200, (err: { $metadata?: { httpStatusCode?: number } }) => err.$metadata?.httpStatusCode)
    t.equal(status, 404, 'no object')
    if (!s3.strict) return t.comment('s3rver: unfinished multipart uploads cannot be listed')
    const list = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }))
    t.same(list.Uploads ?? [], [], 'no unfinished multipart upload')
  }
})

t.test('large bodies go up in parts of exactly partSize, at most queueSize at once', async t => {
  const { store, sent } = open(t)
  await store.init()
  await store.put(newBlobKey(), byteStream(12 * MiB + 3))
  const parts = sent.filter(c => c.name === 'UploadPartCommand')
  t.same(parts.map(p => (p.input.Body as { byteLength: number }).byteLength), [5 * MiB, 5 * MiB, 2 * MiB + 3])
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
  await t.rejects(refused.store.init(), /S3_CREATE_BUCKET/)
  const allowed = open(t, { bucket })
  await allowed.store.init()
  await t.resolves(allowed.store.ping())
})

t.test('wrong credentials: ping answers STORAGE_UNAVAILABLE', { skip: s3.strict ? false : 's3rver accepts any signature' }, async t => {
  const { client } = recordingClient(s3, { credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: 'wrong' } })
  const { store } = open(t, { client })
  await t.rejects(store.ping(), { code: 'DROPCODE_STORAGE_UNAVAILABLE' })
})
