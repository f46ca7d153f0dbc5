/**
 * S3 BlobStore: any S3-compatible endpoint (AWS S3, MinIO, Ceph RGW).
 *
 * Key layout: `{S3_PREFIX}{key}` in one bucket; keys are 32 random hex digits, so they spread
 * evenly over S3's partitions and say nothing about the file.
 *
 * Uploads stream through @aws-sdk/lib-storage: the body is cut into `partSize` parts (default
 * 8 MiB), `queueSize` of them (default 4) in flight at once, so one upload holds at most about
 * partSize × (queueSize + 1) bytes, whatever the file size. A body shorter than one part goes
 * out as a single PutObject. If the body or S3 fails, lib-storage aborts the multipart upload
 * (leavePartsOnError: false); if even the abort fails, the key is still in the cleanup index and
 * the sweeper's `purge` aborts every unfinished upload under it.
 *
 * Chunked uploads map onto S3 multipart uploads as described in s3-chunks.ts.
 *
 * Checksums: with S3_CHECKSUM_MODE=when_required (default) the SDK sends plain bodies and
 * checksums only where S3 demands them. The SDK's default ("when_supported") sends streamed
 * bodies as aws-chunked with a CRC trailer, which many S3-compatible servers reject (Ceph RGW:
 * 411 MissingContentLength) or store verbatim (s3rver).
 *
 * Permissions needed: s3:PutObject, s3:GetObject, s3:DeleteObject, s3:AbortMultipartUpload,
 * s3:ListBucketMultipartUploads, s3:ListBucket (HeadBucket), and s3:CreateBucket only when
 * S3_CREATE_BUCKET=true and the bucket may be missing.
 */
import { pipeline, type Readable } from 'node:stream'
import {
  AbortMultipartUploadCommand, CreateBucketCommand, DeleteObjectCommand, GetObjectCommand,
  HeadBucketCommand, ListMultipartUploadsCommand, ListObjectsV2Command, type S3Client
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { DropcodeError } from '../errors.js'
import { isBlobKey } from '../ids.js'
import { BlobNotFoundError, type BlobStore } from './blob-store.js'
import { ByteCounter } from './byte-counter.js'
import { createS3Chunks } from './s3-chunks.js'

export interface S3BlobStoreOptions {
  client: S3Client
  bucket: string
  /** Prepended to every object key: '' or ending in '/'. */
  prefix: string
  /** Bytes per part (≥ 5 MiB, S3's minimum for all parts but the last). */
  partSize: number
  /** Parts in flight per upload. */
  queueSize: number
  /** Create the bucket in init() when it is missing. */
  createBucket: boolean
}

const errorName = (err: unknown) => (err as { name?: string, Code?: string })?.name ?? ''
const httpStatus = (err: unknown) => (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode
const unavailable = (err: unknown) => new DropcodeError('DROPCODE_STORAGE_UNAVAILABLE', undefined, undefined, { cause: err })

export function createS3BlobStore (opts: S3BlobStoreOptions): BlobStore {
  const { client, bucket, prefix } = opts
  const objectKey = (key: string) => {
    if (!isBlobKey(key)) throw new Error(`invalid object key ${JSON.stringify(key)}`)
    return prefix + key
  }

  async function abortUnfinished (key: string) {
    let KeyMarker: string | undefined
    let UploadIdMarker: string | undefined
    do {
      const page = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: key, KeyMarker, UploadIdMarker }))
      for (const u of page.Uploads ?? []) {
        if (u.Key !== key) continue
        await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u.UploadId })).catch(err => {
          if (errorName(err) !== 'NoSuchUpload') throw err
        })
      }
      KeyMarker = page.IsTruncated === true ? page.NextKeyMarker : undefined
      UploadIdMarker = page.NextUploadIdMarker
    } while (KeyMarker !== undefined)
  }

  /** Streams a body of unknown length into `Key`; rejects with the body's own error if it failed. */
  async function uploadStream (Key: string, body: Readable): Promise<number> {
    let bodyError: unknown
    body.once('error', err => { bodyError = err })
    // pipeline, not a 'data' listener: lib-storage pulls from the stream and needs backpressure.
    const counter = new ByteCounter()
    pipeline(body, counter, () => {})
    const upload = new Upload({
      client,
      params: { Bucket: bucket, Key, Body: counter, ContentType: 'application/octet-stream' },
      partSize: opts.partSize,
      queueSize: opts.queueSize,
      leavePartsOnError: false
    })
    try {
      await upload.done()
    } catch (err) {
      throw bodyError ?? unavailable(err)
    }
    return counter.bytes
  }

  async function deleteChunkObjects (Key: string) {
    let ContinuationToken: string | undefined
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${Key}.chunk-`, ContinuationToken }))
      // One DeleteObject each: DeleteObjects needs Content-MD5, which some S3-compatible servers
      // demand and the SDK's when_required checksum mode no longer sends.
      for (const o of page.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }))
      ContinuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined
    } while (ContinuationToken !== undefined)
  }

  const chunks = createS3Chunks({
    client,
    bucket,
    partSize: opts.partSize,
    uploadStream: async (Key, body) => { await uploadStream(Key, body) },
    storageError: unavailable
  })

  return {
    async put (key, body) {
      return { size: await uploadStream(objectKey(key), body) }
    },

    beginChunked: key => chunks.begin(objectKey(key)),
    putChunk: (key, handle, chunk) => chunks.put(objectKey(key), handle, chunk),
    discardChunk: (_key, _handle, receipt) => chunks.discard(receipt),
    completeChunked: (key, handle, receipts) => chunks.complete(objectKey(key), handle, receipts),

    async get (key) {
      const Key = objectKey(key)
      try {
        const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key }))
        return { body: res.Body as Readable, size: res.ContentLength ?? 0 }
      } catch (err) {
        if (errorName(err) === 'NoSuchKey' || httpStatus(err) === 404) throw new BlobNotFoundError(key)
        throw unavailable(err)
      }
    },

    async delete (key) {
      const Key = objectKey(key)
      try {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }))
      } catch (err) {
        if (errorName(err) !== 'NoSuchKey') throw unavailable(err)
      }
    },

    async purge (key) {
      await this.delete(key)
      try {
        await deleteChunkObjects(objectKey(key))
      } catch (err) {
        throw unavailable(err)
      }
      try {
        await abortUnfinished(objectKey(key))
      } catch (err) {
        // Servers without ListMultipartUploads (s3rver: 501) leave this to lifecycle rules.
        const status = httpStatus(err)
        if (status !== 501 && status !== 405) throw unavailable(err)
      }
    },

    async init () {
      try {
        await client.send(new HeadBucketCommand({ Bucket: bucket }))
        return
      } catch (err) {
        if (!(httpStatus(err) === 404 && opts.createBucket)) {
          throw new Error(`S3 bucket ${bucket} is not usable (${errorName(err) || 'error'} ${httpStatus(err) ?? ''})${httpStatus(err) === 404 ? '; set S3_CREATE_BUCKET=true to create it' : ''}`, { cause: err })
        }
      }
      try {
        await client.send(new CreateBucketCommand({ Bucket: bucket }))
      } catch (err) {
        if (errorName(err) !== 'BucketAlreadyOwnedByYou') throw err
      }
    },

    async ping () {
      try {
        await client.send(new HeadBucketCommand({ Bucket: bucket }))
      } catch (err) {
        throw unavailable(err)
      }
    }
  }
}
