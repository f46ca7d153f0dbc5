/**
 * The one place that picks a BlobStore driver (STORAGE_DRIVER). It builds the driver's client
 * and hands back a `close` for it; nothing else branches on the backend.
 */
import { S3Client } from '@aws-sdk/client-s3'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import type { StorageConfig } from '../config.js'
import type { BlobStore } from './blob-store.js'
import { createFsBlobStore } from './fs-store.js'
import { createS3BlobStore } from './s3/store.js'

export type { BlobStore, ByteRange, ChunkReceipt } from './blob-store.js'
export { BlobNotFoundError } from './blob-store.js'

/** Builds an S3 client from the storage settings (also used by tests and benchmarks). */
export function createS3Client (config: Extract<StorageConfig, { driver: 's3' }>): S3Client {
  const checksum = config.checksumMode === 'when_required' ? 'WHEN_REQUIRED' : 'WHEN_SUPPORTED'
  return new S3Client({
    region: config.region,
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
    ...(config.credentials !== undefined ? { credentials: config.credentials } : {}),
    forcePathStyle: config.forcePathStyle,
    requestChecksumCalculation: checksum,
    responseChecksumValidation: checksum,
    // Fail over quickly; the caller answers 503 and the client retries.
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({
      connectionTimeout: 5_000, // ms to establish a connection
      // ms a socket may stay idle mid-request (not a whole-request deadline: a part upload or a
      // long download keeps it alive by moving bytes). A stuck endpoint fails the request.
      requestTimeout: 60_000,
      // Uploads run queueSize parts at once and downloads stream for long; the SDK default of
      // 50 sockets would queue requests behind a handful of large transfers.
      httpAgent: { keepAlive: true, maxSockets: 256 }
    })
  })
}

export interface OpenedBlobStore {
  store: BlobStore
  /** Releases the driver's client. */
  close (): Promise<void>
}

export async function openBlobStore (config: StorageConfig, options: { s3Client?: S3Client } = {}): Promise<OpenedBlobStore> {
  if (config.driver === 's3') {
    const client = options.s3Client ?? createS3Client(config)
    const store = createS3BlobStore({
      client,
      bucket: config.bucket,
      prefix: config.prefix,
      partSize: config.partSize,
      queueSize: config.queueSize,
      uploadMemory: config.uploadMemory,
      createBucket: config.createBucket,
      endpoint: config.endpoint
    })
    return { store, close: async () => { if (options.s3Client === undefined) client.destroy() } }
  }
  return { store: createFsBlobStore({ dir: config.dir }), close: async () => {} }
}
