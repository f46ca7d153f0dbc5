/**
 * How the bench tells a peer process where its S3 is: BENCH_S3_* variables, written by the
 * workload (`peerS3Env`) and read by the peer (`s3FromEnv`: bare.ts's relay, tus-s3.ts's store),
 * with the same client settings on both peers: path-style addressing and plain bodies (no SDK
 * checksum trailers, as dropcode's S3_CHECKSUM_MODE default sends them: radosgw answers a
 * streamed body with an aws-chunked trailer 411).
 */
import type { S3ClientConfig } from '@aws-sdk/client-s3'

/** The environment for a peer using `bucket` on the bench's S3. */
export function peerS3Env (s3: { endpoint: string, accessKeyId: string, secretAccessKey: string }, bucket: string): Record<string, string> {
  return { BENCH_S3_ENDPOINT: s3.endpoint, BENCH_S3_ACCESS_KEY_ID: s3.accessKeyId, BENCH_S3_SECRET_ACCESS_KEY: s3.secretAccessKey, BENCH_S3_BUCKET: bucket }
}

/** In a peer: its bucket and S3 client settings; throws naming `script` when a variable is missing. */
export function s3FromEnv (script: string): { bucket: string, client: S3ClientConfig } {
  const env = (name: string) => {
    const v = process.env[name]
    if (v === undefined || v === '') throw new Error(`${script} needs ${name}`)
    return v
  }
  return {
    bucket: env('BENCH_S3_BUCKET'),
    client: {
      endpoint: env('BENCH_S3_ENDPOINT'),
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: env('BENCH_S3_ACCESS_KEY_ID'), secretAccessKey: env('BENCH_S3_SECRET_ACCESS_KEY') },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED'
    }
  }
}
