/**
 * The peer on S3: the tus reference server for Node (@tus/server with @tus/s3-store), its own
 * process, storing in the bucket BENCH_S3_BUCKET at BENCH_S3_ENDPOINT (BENCH_S3_ACCESS_KEY_ID,
 * BENCH_S3_SECRET_ACCESS_KEY); prints `listening http://127.0.0.1:PORT` (uploads under /files/).
 * GET /files/ID answers the stored object (@tus/server's download handler over GetObject).
 *   node --import=tsx bench/peers/tus-s3.ts
 *
 * s3-store's defaults, as a user would run it: 8 MiB parts (dropcode's S3_PART_SIZE default
 * too), up to 60 part uploads at once; each PATCH is cut into parts in temporary files, which
 * are sent as they fill. Its extensions: creation, creation-with-upload, creation-defer-length,
 * termination, expiration; no concatenation, so tus-js-client's `parallelUploads` cannot be used
 * against it. Plain bodies (no SDK checksum trailers), as dropcode's S3_CHECKSUM_MODE default
 * sends them: radosgw answers a streamed body with an aws-chunked trailer 411.
 */
import http from 'node:http'
import { S3Store } from '@tus/s3-store'
import { Server } from '@tus/server'

const env = (name: string) => {
  const v = process.env[name]
  if (v === undefined || v === '') throw new Error(`tus-s3.ts needs ${name}`)
  return v
}
const datastore = new S3Store({
  s3ClientConfig: {
    bucket: env('BENCH_S3_BUCKET'),
    endpoint: env('BENCH_S3_ENDPOINT'),
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: env('BENCH_S3_ACCESS_KEY_ID'), secretAccessKey: env('BENCH_S3_SECRET_ACCESS_KEY') },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED'
  }
})
const tus = new Server({ path: '/files', datastore })
const server = http.createServer((req, res) => { tus.handle(req, res).catch(() => res.destroy()) })
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening http://127.0.0.1:${(server.address() as { port: number }).port}\n`))
