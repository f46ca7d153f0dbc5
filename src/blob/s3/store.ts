/**
 * S3 BlobStore: any S3-compatible endpoint (AWS S3, MinIO, Ceph RGW).
 *
 * Key layout: `{S3_PREFIX}{key}` in one bucket; keys are 32 random hex digits, so they spread
 * evenly over S3's partitions and say nothing about the file. Chunked sessions add
 * `{S3_PREFIX}{key}.chunk-{index}-{nonce}` temporary objects (chunks.ts), appendable (tus)
 * uploads `{S3_PREFIX}{key}.chunk-tail-{nonce}` ones (appends.ts); purge deletes them all.
 *
 * Uploads are cut into S3_PART_SIZE parts (default 8 MiB), S3_QUEUE_SIZE (default 2) in flight
 * per upload, buffered in reusable 64 KiB slabs from one pool of S3_UPLOAD_MEMORY bytes (default
 * 256 MiB) shared by every upload (parts.ts): upload memory is that pool, whatever the file sizes
 * and the number of uploads, and an upload holds only the slabs its unsent bytes fill (a stalled
 * one costs what it sent, not a part). `admit` is the pool's gate: routes wait there before they
 * read a body, so an upload waiting for memory holds one socket read, not a pipeline of chunks.
 * A body shorter than one part goes out as a single PutObject. If the body or
 * S3 fails, the multipart upload is aborted; if even the abort fails, the key is still in the
 * cleanup index and the sweeper's `purge` aborts every unfinished upload under it.
 *
 * Checksums: with S3_CHECKSUM_MODE=when_required (default) the SDK sends plain bodies and
 * checksums only where S3 demands them. The SDK's default ("when_supported") sends streamed
 * bodies as aws-chunked with a CRC trailer, which many S3-compatible servers reject (Ceph RGW:
 * 411 MissingContentLength) or store verbatim (s3rver).
 *
 * Permissions needed: s3:PutObject, s3:GetObject, s3:DeleteObject, s3:AbortMultipartUpload,
 * s3:ListBucketMultipartUploads, s3:ListMultipartUploadParts (completing an appendable upload),
 * s3:ListBucket (HeadBucket, listing chunk objects), and
 * s3:CreateBucket only when S3_CREATE_BUCKET=true and the bucket may be missing.
 */
import type { S3Client } from '@aws-sdk/client-s3'
import type { StorageConfig } from '../../config.js'
import { StartupError } from '../../core/errors.js'
import { isBlobKey } from '../../core/ids.js'
import type { BlobStore, OpenedBlobStore } from '../blob-store.js'
import { createS3Client } from './client.js'
import { createS3Api } from './api.js'
import { createS3Appends, isAppendReceipt } from './appends.js'
import { concatenateObjects } from './concatenate.js'
import { createS3Chunks } from './chunks.js'
import { ticketOf } from './parts.js'

export interface S3BlobStoreOptions {
  client: S3Client
  bucket: string
  /** Prepended to every object key: '' or ending in '/'. */
  prefix: string
  /** Bytes per part (≥ 5 MiB, S3's minimum for all parts but the last). */
  partSize: number
  /** Parts in flight per upload. */
  queueSize: number
  /** Bytes of slabs shared by all uploads (S3_UPLOAD_MEMORY). */
  uploadMemory: number
  /** Create the bucket in init() when it is missing. */
  createBucket: boolean
  /** For messages only. */
  endpoint?: string | undefined
}

/** The S3 driver for the storage settings, over `client` (kept open by `close`) or one of its own. */
export function openS3BlobStore (config: Extract<StorageConfig, { driver: 's3' }>, client?: S3Client): OpenedBlobStore {
  const own = client ?? createS3Client(config)
  const store = createS3BlobStore({
    client: own,
    bucket: config.bucket,
    prefix: config.prefix,
    partSize: config.partSize,
    queueSize: config.queueSize,
    uploadMemory: config.uploadMemory,
    createBucket: config.createBucket,
    endpoint: config.endpoint
  })
  return { store, close: async () => { if (client === undefined) own.destroy() } }
}

export function createS3BlobStore (opts: S3BlobStoreOptions): BlobStore {
  const s3 = createS3Api(opts)
  const chunks = createS3Chunks(s3)
  const appends = createS3Appends(s3)
  const objectKey = (key: string) => {
    if (!isBlobKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return opts.prefix + key
  }

  return {
    async put (key, body, options) {
      return { size: await s3.putStream(objectKey(key), body, options?.maxLength, ticketOf(options?.ticket)) }
    },

    // async: an invalid key rejects (never throws synchronously) before any I/O
    beginChunked: async key => await chunks.begin(objectKey(key)),
    putChunk: async (key, handle, chunk) => await chunks.put(objectKey(key), handle, chunk),
    // An appendable upload is a multipart upload like a chunked session; its receipts say which it is.
    appendChunk: async (key, handle, input) => await appends.append(objectKey(key), handle, input),
    discardChunk: async (_key, _handle, receipt) => { await (isAppendReceipt(receipt) ? appends.discard(receipt) : chunks.discard(receipt)) },
    async completeChunked (key, handle, receipts) {
      // No receipt at all (an appendable upload of 0 bytes): the chunked path stores an empty object too.
      if (receipts.length > 0 && receipts.every(isAppendReceipt)) return await appends.complete(objectKey(key), handle, receipts)
      return await chunks.complete(objectKey(key), handle, receipts)
    },

    concatenate: async (key, handle, sources) => await concatenateObjects(s3, objectKey(key), handle, sources.map(s => ({ object: objectKey(s.key), size: s.size }))),

    get: async (key, range) => await s3.get(objectKey(key), range),
    delete: async key => { await s3.delete(objectKey(key)) },

    async purge (key) {
      const Key = objectKey(key)
      await s3.delete(Key)
      // One DeleteObject each: DeleteObjects needs Content-MD5, which some S3-compatible servers
      // demand and the SDK's when_required checksum mode does not send.
      for await (const chunk of s3.list(`${Key}.chunk-`)) await s3.delete(chunk)
      for await (const uploadId of s3.unfinishedUploads(Key)) await s3.abortMultipart(Key, uploadId)
    },

    async init () {
      const where = `S3 bucket "${opts.bucket}"${opts.endpoint !== undefined ? ` at ${opts.endpoint}` : ''}`
      try {
        if (await s3.headBucket() === 'ok') return
        if (!opts.createBucket) throw new StartupError(`${where} does not exist (S3_BUCKET)`, 'create it, or set S3_CREATE_BUCKET=true to let dropcode create it')
        await s3.createBucket()
      } catch (err) {
        if (err instanceof StartupError) throw err
        const cause = (err as { cause?: unknown }).cause ?? err
        const status = (cause as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode
        const code = (cause as { code?: string }).code ?? (cause as { name?: string }).name
        const why = [code, status !== undefined ? `HTTP ${status}` : ''].filter(Boolean).join(', ') || String(cause)
        const hint = status === 403
          ? 'check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, and that they may use this bucket'
          : status === undefined ? 'check S3_ENDPOINT (is the server running and reachable?)' : 'check S3_ENDPOINT, S3_REGION and S3_FORCE_PATH_STYLE'
        throw new StartupError(`${where} is not usable: ${why}`, hint, { cause: err })
      }
    },

    async ping () {
      if (await s3.headBucket() !== 'ok') throw new Error(`S3 bucket ${opts.bucket} does not exist`)
    },

    uploadMemory: () => s3.pool.stats,

    admit: async (maxLength, signal) => await s3.pool.admit(maxLength, signal)
  }
}
