/** The S3 client of the S3 driver, from the storage settings (also used by tests and benchmarks). */
import { S3Client } from '@aws-sdk/client-s3'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import type { StorageConfig } from '../../config.js'

/** Builds an S3 client from the storage settings. */
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
      // No cap of our own on sockets to S3: each download holds one for as long as its reader
      // reads, so any cap (the SDK's default is 50) lets readers that stop reading queue every
      // other S3 request of the instance, uploads included. The transfer slots (plugins/
      // overload.ts) and the part memory (blob/s3/parts.ts) bound how many are open.
      httpAgent: { keepAlive: true, maxSockets: Infinity }
    })
  })
}
