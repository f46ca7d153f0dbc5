/**
 * Baselines without dropcode, each its own process (like the service), printing
 * `listening http://127.0.0.1:PORT` once it listens:
 *   node --import=tsx bench/peers/bare.ts files DIR   bare node:http: PUT/POST /f/NAME pipes the
 *                                                      body to DIR/NAME; GET /f/NAME answers
 *                                                      fs.createReadStream(DIR/NAME)
 *   node --import=tsx bench/peers/bare.ts hello       a hello-world Fastify route: GET /hello
 *   node --import=tsx bench/peers/bare.ts relay       GET /r/KEY pipes a GetObject of KEY to the
 *                                                      response (S3 from BENCH_S3_* variables):
 *                                                      what any S3 relay pays, without dropcode
 */
import { createReadStream, createWriteStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3'
import Fastify from 'fastify'
import type { Readable } from 'node:stream'
import { s3FromEnv } from './s3-env.js'

const [mode, dir] = process.argv.slice(2)

const announce = (port: number) => process.stdout.write(`listening http://127.0.0.1:${port}\n`)

if (mode === 'files') {
  if (dir === undefined) throw new Error('usage: bare.ts files DIR')
  const server = http.createServer((req, res) => {
    const name = /^\/f\/([A-Za-z0-9_.-]+)$/.exec(req.url ?? '')?.[1]
    if (name === undefined) { res.writeHead(404).end(); return }
    const file = path.join(dir, name)
    if (req.method === 'PUT' || req.method === 'POST') {
      pipeline(req, createWriteStream(file)).then(
        () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
        () => res.writeHead(500).end())
      return
    }
    stat(file).then(s => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': s.size })
      return pipeline(createReadStream(file), res)
    }).catch(() => { if (!res.headersSent) res.writeHead(404); res.end() })
  })
  server.listen(0, '127.0.0.1', () => announce((server.address() as { port: number }).port))
} else if (mode === 'hello') {
  const app = Fastify({ logger: false })
  app.get('/hello', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  announce((app.server.address() as { port: number }).port)
} else if (mode === 'relay') {
  const { bucket: Bucket, client: config } = s3FromEnv('bare.ts relay')
  const client = new S3Client(config)
  const server = http.createServer((req, res) => {
    const Key = /^\/r\/([A-Za-z0-9_.-]+)$/.exec(req.url ?? '')?.[1]
    if (Key === undefined) { res.writeHead(404).end(); return }
    client.send(new GetObjectCommand({ Bucket, Key })).then(out => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': out.ContentLength })
      return pipeline(out.Body as Readable, res)
    }).catch(() => { if (!res.headersSent) res.writeHead(502); res.end() })
  })
  server.listen(0, '127.0.0.1', () => announce((server.address() as { port: number }).port))
} else {
  throw new Error(`unknown mode ${String(mode)}`)
}
