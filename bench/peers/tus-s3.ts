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
 * against it. Its S3 client: s3-env.ts.
 */
import http from 'node:http'
import { S3Store } from '@tus/s3-store'
import { Server } from '@tus/server'
import { s3FromEnv } from './s3-env.js'

const { bucket, client } = s3FromEnv('tus-s3.ts')
const datastore = new S3Store({ s3ClientConfig: { bucket, ...client } })
const tus = new Server({ path: '/files', datastore })
const server = http.createServer((req, res) => { tus.handle(req, res).catch(() => res.destroy()) })
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening http://127.0.0.1:${(server.address() as { port: number }).port}\n`))
