/**
 * The one place that picks a BlobStore driver (STORAGE_DRIVER): the filesystem (fs-store.ts) or
 * S3 (s3/store.ts, whose client s3/client.ts builds). Nothing else branches on the backend.
 */
import type { S3Client } from '@aws-sdk/client-s3'
import type { StorageConfig } from '../config.js'
import type { OpenedBlobStore } from './blob-store.js'
import { createFsBlobStore } from './fs-store.js'
import { openS3BlobStore } from './s3/store.js'

export type { AppendInput, BlobStore, ChunkReceipt, OpenedBlobStore, UploadTicket } from './blob-store.js'
export { BlobNotFoundError } from './blob-store.js'
export { createS3Client } from './s3/client.js'

export async function openBlobStore (config: StorageConfig, options: { s3Client?: S3Client } = {}): Promise<OpenedBlobStore> {
  if (config.driver === 's3') return openS3BlobStore(config, options.s3Client)
  return { store: createFsBlobStore({ dir: config.dir }), close: async () => {} }
}
