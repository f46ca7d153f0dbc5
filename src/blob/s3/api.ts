/**
 * The S3 calls dropcode makes, and nothing else: a narrow interface over the AWS SDK client, so
 * the store (store.ts), the chunk layouts (chunks.ts) and appends (appends.ts) share one way to
 * talk to S3 and one translation of S3 failures into the error catalogue:
 *   NoSuchKey / 404 on a read      → BlobNotFoundError
 *   NoSuchUpload                   → DROPCODE_SESSION_NOT_FOUND (a chunked upload that is gone)
 *   507, XMinioStorageFull, …      → DROPCODE_STORAGE_FULL
 *   anything else                  → DROPCODE_STORAGE_UNAVAILABLE (the cause is kept for the log)
 *
 * Streaming uploads of unknown length are cut into parts by parts.ts, in 64 KiB slabs from one
 * pool per store (`uploadMemory` bytes in all, `queueSize` parts in flight per upload): a stream
 * that fits in one part is one PutObject, a longer one a multipart upload, aborted if the body or
 * S3 fails. A part goes out as a stream over its slabs; the SDK never retries a streamed body (it
 * cannot rewind it), so `resending` does, with a fresh stream over the same slabs, as the SDK
 * would have for a Buffer (3 attempts in all, on network errors and 5xx answers).
 */
import type { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateBucketCommand, CreateMultipartUploadCommand,
  DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, ListMultipartUploadsCommand, ListObjectsV2Command,
  ListPartsCommand, PutObjectCommand, UploadPartCommand, UploadPartCopyCommand, type S3Client
} from '@aws-sdk/client-s3'
import { DropcodeError } from '../../core/errors.js'
import type { ByteRange } from '../../core/byte-range.js'
import { BlobNotFoundError } from '../blob-store.js'
import { type Claim, SlabPool, streamParts } from './parts.js'

export interface PartRef { n: number, etag: string, size: number }

export interface S3Api {
  /** The slabs every upload of this store draws from (`pool.stats` for metrics). */
  pool: SlabPool
  /** Parts uploaded at once per stream. */
  queueSize: number
  /**
   * Streams a body of unknown length into `key`; rejects with the body's own error if the body
   * failed. `maxLength`: an upper bound of its length, if known. @returns bytes stored
   */
  putStream (key: string, body: Readable, maxLength?: number, ticket?: Claim): Promise<number>
  /** Stores `length` bytes of known length as one object; `again`: a fresh body, to resend a streamed one. */
  putObject (key: string, body: Buffer | Readable, length: number, again?: () => Buffer | Readable): Promise<void>
  /** Stores an empty object. */
  putEmpty (key: string): Promise<void>
  /** The object, whole or a byte range; `size` is the object's full size. */
  get (key: string, range?: ByteRange): Promise<{ body: Readable, size: number }>
  /** Succeeds when the object is already gone. */
  delete (key: string): Promise<void>
  /** Object keys under a prefix, page by page. */
  list (prefix: string): AsyncIterable<string>
  createMultipart (key: string): Promise<string>
  /** `again`: a fresh body over the same bytes, to resend a streamed one. */
  uploadPart (key: string, uploadId: string, n: number, body: Buffer | Readable, length: number, again?: () => Buffer | Readable): Promise<string>
  /** Copies bytes `range` of object `source` (same bucket) into part `n`, inside S3. @returns the part's ETag */
  uploadPartCopy (key: string, uploadId: string, n: number, source: string, range: ByteRange): Promise<string>
  /** Every part an unfinished multipart upload holds, in order. */
  listParts (key: string, uploadId: string): Promise<PartRef[]>
  completeMultipart (key: string, uploadId: string, parts: PartRef[]): Promise<void>
  /** Succeeds when the upload is already gone. */
  abortMultipart (key: string, uploadId: string): Promise<void>
  /** Upload ids of unfinished multipart uploads of exactly `key`; none where the server cannot list them. */
  unfinishedUploads (key: string): AsyncIterable<string>
  /** Whether the bucket exists and answers: 'ok', 'missing', or throws. */
  headBucket (): Promise<'ok' | 'missing'>
  createBucket (): Promise<void>
}

const errorName = (err: unknown) => (err as { name?: string } | null)?.name ?? ''
const httpStatus = (err: unknown) => (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode
const FULL = new Set(['XMinioStorageFull', 'InsufficientCapacity', 'QuotaExceeded', 'XMinioAdminBucketQuotaExceeded'])

/** An S3 failure as a catalogue error. */
export function s3Error (err: unknown): Error {
  if (err instanceof DropcodeError || err instanceof BlobNotFoundError) return err
  if (errorName(err) === 'NoSuchUpload') return new DropcodeError('DROPCODE_SESSION_NOT_FOUND', undefined, undefined, { cause: err })
  if (httpStatus(err) === 507 || FULL.has(errorName(err))) return new DropcodeError('DROPCODE_STORAGE_FULL', undefined, undefined, { cause: err })
  return new DropcodeError('DROPCODE_STORAGE_UNAVAILABLE', undefined, undefined, { cause: err })
}

export interface S3ApiOptions {
  client: S3Client
  bucket: string
  /** Bytes per part (≥ 5 MiB). */
  partSize: number
  /** Parts in flight per upload. */
  queueSize: number
  /** Bytes of slabs for all uploads together (at least two parts). */
  uploadMemory: number
}

/** What the SDK would retry: no answer at all, or a 5xx. */
const transient = (err: unknown) => { const s = httpStatus(err); return s === undefined || s >= 500 }

/** `op(body)`, and up to twice more with `again()` when a streamed body met a transient failure. */
async function resending<T> (body: Buffer | Readable, again: (() => Buffer | Readable) | undefined, op: (body: Buffer | Readable) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op(body)
    } catch (err) {
      if (again === undefined || Buffer.isBuffer(body) || attempt >= 3 || !transient(err)) throw err
      await sleep(100 * 2 ** attempt)
      body = again()
    }
  }
}

export function createS3Api ({ client, bucket: Bucket, partSize, queueSize, uploadMemory }: S3ApiOptions): S3Api {
  const pool = new SlabPool(partSize, uploadMemory)
  const send = async <T>(op: () => Promise<T>): Promise<T> => {
    try {
      return await op()
    } catch (err) {
      throw s3Error(err)
    }
  }

  const api: S3Api = {
    pool,
    queueSize,

    async putStream (Key, body, maxLength, ticket) {
      let bodyError: unknown
      body.once('error', err => { bodyError ??= err })
      let uploadId: Promise<string> | undefined
      const parts: PartRef[] = []
      // When S3 fails first, stopping the stream tears the body down too: S3's error is the cause.
      let storageError: unknown
      const noting = async <T>(op: () => Promise<T>) => await op().catch(err => { storageError ??= err; throw err })
      try {
        const { size } = await streamParts(body, {
          pool,
          concurrency: queueSize,
          holdBack: 0,
          maxLength,
          ticket,
          sendWhole: async (data, length, again) => { await noting(() => api.putObject(Key, data, length, again)) },
          sendPart: async (i, data, length, again) => {
            await noting(async () => {
              uploadId ??= api.createMultipart(Key)
              parts.push({ n: i + 1, etag: await api.uploadPart(Key, await uploadId, i + 1, data, length, again), size: length })
            })
          }
        })
        if (uploadId !== undefined) await api.completeMultipart(Key, await uploadId, parts)
        return size
      } catch (err) {
        if (uploadId !== undefined) await uploadId.then(id => api.abortMultipart(Key, id)).catch(() => {})
        throw storageError !== undefined ? s3Error(storageError) : bodyError ?? s3Error(err)
      }
    },

    async putObject (Key, data, length, again) {
      await send(() => resending(data, again, Body => client.send(new PutObjectCommand({ Bucket, Key, Body, ContentLength: length, ContentType: 'application/octet-stream' }))))
    },

    async putEmpty (Key) {
      await send(() => client.send(new PutObjectCommand({ Bucket, Key, Body: new Uint8Array(0), ContentLength: 0 })))
    },

    async get (Key, range) {
      try {
        const Range = range === undefined ? undefined : `bytes=${range.start}-${range.end}`
        const res = await client.send(new GetObjectCommand({ Bucket, Key, Range }))
        const total = range === undefined ? res.ContentLength : Number(/\/(\d+)$/.exec(res.ContentRange ?? '')?.[1])
        return { body: res.Body as Readable, size: total ?? 0 }
      } catch (err) {
        if (errorName(err) === 'NoSuchKey' || httpStatus(err) === 404) throw new BlobNotFoundError(Key)
        throw s3Error(err)
      }
    },

    async delete (Key) {
      try {
        await client.send(new DeleteObjectCommand({ Bucket, Key }))
      } catch (err) {
        if (errorName(err) !== 'NoSuchKey') throw s3Error(err)
      }
    },

    async * list (Prefix) {
      let ContinuationToken: string | undefined
      do {
        const page = await send(() => client.send(new ListObjectsV2Command({ Bucket, Prefix, ContinuationToken })))
        for (const o of page.Contents ?? []) yield o.Key!
        ContinuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined
      } while (ContinuationToken !== undefined)
    },

    async createMultipart (Key) {
      return (await send(() => client.send(new CreateMultipartUploadCommand({ Bucket, Key, ContentType: 'application/octet-stream' })))).UploadId!
    },

    async uploadPart (Key, UploadId, PartNumber, data, ContentLength, again) {
      return (await send(() => resending(data, again, Body => client.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber, Body, ContentLength }))))).ETag!
    },

    async uploadPartCopy (Key, UploadId, PartNumber, source, range) {
      const CopySource = `${Bucket}/${source.split('/').map(encodeURIComponent).join('/')}`
      const CopySourceRange = `bytes=${range.start}-${range.end}`
      return (await send(() => client.send(new UploadPartCopyCommand({ Bucket, Key, UploadId, PartNumber, CopySource, CopySourceRange })))).CopyPartResult!.ETag!
    },

    async listParts (Key, UploadId) {
      const parts: PartRef[] = []
      let PartNumberMarker: string | undefined
      do {
        let page
        try {
          page = await client.send(new ListPartsCommand({ Bucket, Key, UploadId, PartNumberMarker }))
        } catch (err) {
          // Ceph RGW answers NoSuchKey for an upload that is gone (AWS: NoSuchUpload).
          if (errorName(err) === 'NoSuchKey') throw new DropcodeError('DROPCODE_SESSION_NOT_FOUND', undefined, undefined, { cause: err })
          throw s3Error(err)
        }
        for (const p of page.Parts ?? []) parts.push({ n: p.PartNumber!, etag: p.ETag!, size: p.Size! })
        PartNumberMarker = page.IsTruncated === true ? page.NextPartNumberMarker : undefined
      } while (PartNumberMarker !== undefined)
      return parts
    },

    async completeMultipart (Key, UploadId, parts) {
      const Parts = [...parts].sort((a, b) => a.n - b.n).map(p => ({ PartNumber: p.n, ETag: p.etag }))
      await send(() => client.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts } })))
    },

    async abortMultipart (Key, UploadId) {
      try {
        await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }))
      } catch (err) {
        if (errorName(err) !== 'NoSuchUpload' && errorName(err) !== 'NoSuchKey') throw s3Error(err)
      }
    },

    async * unfinishedUploads (Key) {
      let KeyMarker: string | undefined
      let UploadIdMarker: string | undefined
      do {
        let page
        try {
          page = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: Key, KeyMarker, UploadIdMarker }))
        } catch (err) {
          // Servers without ListMultipartUploads (s3rver: 501) leave this to lifecycle rules.
          const status = httpStatus(err)
          if (status === 501 || status === 405) return
          throw s3Error(err)
        }
        for (const u of page.Uploads ?? []) if (u.Key === Key) yield u.UploadId!
        KeyMarker = page.IsTruncated === true ? page.NextKeyMarker : undefined
        UploadIdMarker = page.NextUploadIdMarker
      } while (KeyMarker !== undefined)
    },

    async headBucket () {
      try {
        await client.send(new HeadBucketCommand({ Bucket }))
        return 'ok'
      } catch (err) {
        if (httpStatus(err) === 404) return 'missing'
        throw s3Error(err)
      }
    },

    async createBucket () {
      try {
        await client.send(new CreateBucketCommand({ Bucket }))
      } catch (err) {
        if (errorName(err) === 'BucketAlreadyOwnedByYou') return
        // Instances starting together race to create it, and servers answer the losers
        // differently (s3rver and radosgw: BucketAlreadyExists, though the bucket is theirs).
        // What counts is that the bucket is there for us now.
        if (await api.headBucket().catch(() => 'missing') === 'ok') return
        throw s3Error(err)
      }
    }
  }
  return api
}
