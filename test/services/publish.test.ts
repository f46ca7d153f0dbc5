/**
 * A publish whose instance died between creating the record and confirming it (issue 20): the
 * code was never answered, so one sweep after the publish window the sweeper retracts the record
 * and deletes the object; a confirm that comes after that fails, so the code is never answered.
 * Before, the object was swept at the upload deadline while its record lived on. The crash is
 * the publish's first two steps run against the real stores without the third; both driver
 * pairs.
 */
import { Readable } from 'node:stream'
import t from 'tap'
import { pendingOwner } from '../../src/core/model.js'
import { PUBLISH_WINDOW_MS } from '../../src/services/files.js'
import { startApp, testConfig, type DriverPair } from '../helpers/app.js'
import { startRedis } from '../helpers/redis-server.js'
import { startS3 } from '../helpers/s3.js'
import { listStored } from '../helpers/storage.js'
import { fileRecord } from '../state/contract/files.js'

const [redis, s3] = await Promise.all([startRedis(), startS3()])
t.teardown(async () => { await redis.stop(); await s3.stop() })

for (const pair of ['fs+local', 's3+redis'] as DriverPair[]) {
  t.test(`${pair}: a publish cut between create and confirm is retracted one sweep after its window`, async t => {
    let clock = Date.now()
    const { app, config } = await startApp(t, testConfig(t, pair, { redis, s3 }), { now: () => clock })
    const { files, cleanup } = app.state
    const blob = await app.files.receive(Readable.from([Buffer.from('never answered')]), 'n.txt')
    const file = fileRecord(clock, { blobKey: blob.blobKey, size: blob.size, sha256: blob.sha256 })
    await cleanup.schedule(blob.blobKey, clock + PUBLISH_WINDOW_MS, pendingOwner(file.code))
    t.equal(await files.create(file, clock), true)
    // ... and the instance dies here.

    t.same(await app.sweeper.sweepOnce(), { deleted: 0, failed: 0 }, 'nothing is due within the window')
    clock += PUBLISH_WINDOW_MS + 1
    t.same(await app.sweeper.sweepOnce(), { deleted: 1, failed: 0 })
    t.same(await files.lookup(file.code, clock), { ok: false, reason: 'unknown' }, 'the record is retracted')
    t.same(await listStored(config), [], 'and its object deleted')
    t.equal(await cleanup.confirm(blob.blobKey, file.retainUntil, file.code), false, 'a late confirm fails: the code is never answered')
  })
}
