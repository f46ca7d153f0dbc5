/**
 * The minimum transfer rate on downloads (issue 20): a reader that stops reading, or reads a
 * trickle, must not hold a slot and a stream for long. Raw sockets against a real listening
 * server on both driver pairs, with small figures (256 KiB per 2 s window): a trickling reader is
 * cut within the documented bound (2 windows + 2 ticks) and its claim stays resumable, as any
 * cut download's; a slow reader above the rate gets the whole file.
 */
import t from 'tap'
import { startApp, testConfig, upload, within, type DriverPair } from '../../helpers/app.js'
import { connect, readAtRate } from '../../helpers/raw-socket.js'
import { startRedis } from '../../helpers/redis-server.js'
import { startS3 } from '../../helpers/s3.js'
import { bytes } from '../../helpers/streams.js'
import { BOUND_MS, KiB, MIN_BYTES, MiB, SLACK_MS, WINDOW_MS } from './min-rate-figures.js'

/** Larger than what loopback buffers take from a reader that reads little (~4–8 MiB measured). */
const FILE = 24 * MiB

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })
const backendsOf = { 'fs+local': {}, 's3+redis': { redis, s3 } } as const

const settings = {
  MIN_TRANSFER_BYTES: String(MIN_BYTES),
  MIN_TRANSFER_WINDOW_SECONDS: String(WINDOW_MS / 1000)
}

for (const pair of ['fs+local', 's3+redis'] as DriverPair[]) {
  t.test(`${pair}: a download reader taking a trickle is cut within the bound; its claim stays resumable (min_rate_download_trickle)`, async t => {
    const { app, url } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    const up = await upload(url, [['file', { data: bytes(FILE) }], ['max_downloads', '1']])
    t.equal(up.status, 200)
    const code = up.body.code
    const conn = await connect(app, url)
    conn.client.write(`GET /download/${code} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    // Loopback buffers take several MiB at once (the first window passes); then 16 KiB a
    // second, an eighth of the rate.
    const reading = readAtRate(conn.client, 16 * KiB)
    let took: number
    try {
      took = await within(conn.closed(), 30_000, 'trickling download cut')
    } finally {
      conn.client.destroy()
    }
    const { head } = await reading
    t.match(head, /^HTTP\/1\.1 200 /)
    // The server's socket closes ≤ 2 windows + 2 ticks after the buffers fill; they fill at once.
    t.ok(took < BOUND_MS + SLACK_MS, `cut after ${took} ms (bound ${BOUND_MS} ms once the buffers are full)`)
    const etag = /\r\netag: ([^\r]+)/i.exec(head)?.[1]
    t.ok(etag, 'the claim\'s ETag was sent')
    const resumed = await fetch(`${url}/download/${code}`, { headers: { range: 'bytes=100-', 'if-range': etag! } })
    t.equal(resumed.status, 206, 'the cut download resumes with its claim')
    t.equal((await resumed.arrayBuffer()).byteLength, FILE - 100)
  })

  t.test(`${pair}: a slow download above the rate completes (min_rate_slow_download_ok)`, async t => {
    const { app, url } = await startApp(t, testConfig(t, pair, backendsOf[pair], settings))
    // Larger than the loopback buffers take, read at 2 MiB/s (16 times the minimum): the server
    // waits on the reader for several windows.
    const size = FILE / 2
    const big = await upload(url, [['file', { data: bytes(size) }]])
    t.equal(big.status, 200)
    const down = await connect(app, url)
    down.client.write(`GET /download/${big.body.code} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)
    const started = Date.now()
    const got = await within(readAtRate(down.client, 2 * MiB), 40_000, 'slow download read')
    const took = Date.now() - started
    t.match(got.head, /^HTTP\/1\.1 200 /)
    t.equal(got.got - (got.head.indexOf('\r\n\r\n') + 4), size, 'the whole body arrived')
    t.ok(took > 2 * WINDOW_MS, `over ${took} ms: the rate was checked on the way`)
  })
}
