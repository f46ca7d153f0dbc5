/**
 * Planned Redis switchovers while the service runs (two instances through a Sentinel, download
 * traffic on both): unlike the failovers of test/e2e/processes/failover.test.ts the old primary stays up, as
 * a replica of the new master.
 */
import t from 'tap'
import { upload } from '../../helpers/app.js'
import { afterFailover, downloadTraffic, replicated, setup } from '../../helpers/failover.js'
import { startS3 } from '../../helpers/s3.js'

const s3 = await startS3()
t.teardown(() => s3.stop())

// SENTINEL FAILOVER disconnects the old master's clients; by hand nothing does, so their writes
// answer READONLY until the client reconnects through the Sentinel (reconnectOnError).
for (const [how, name] of [
  ['SENTINEL FAILOVER', 'a planned switchover (SENTINEL FAILOVER) under traffic: both instances follow the new master'],
  ['by hand (REPLICAOF)', 'a switchover by hand (REPLICAOF) under traffic: writes answered READONLY make both instances reconnect to the new master (redis_readonly_after_switchover)']
] as const) {
  t.test(name, async t => {
    const { sentinel, a, b } = await setup(t, s3, { MAX_DOWNLOADS: '1000000' })
    const up = await upload(a.url, [['file', { data: 'x' }], ['max_downloads', '1000000']])
    t.equal(up.status, 200)
    await replicated(sentinel)
    const traffic = downloadTraffic([a.url, b.url], up.body.code)
    await new Promise(resolve => setTimeout(resolve, 300))
    const startedAt = Date.now()
    if (how === 'SENTINEL FAILOVER') await sentinel.switchover()
    else await sentinel.switchoverByHand()
    await sentinel.promoted()
    const switched = Date.now() - startedAt
    // Writes from each instance reach the new master: an upload on one, downloaded on the other.
    const onA = await afterFailover(t, () => upload(a.url, [['file', { data: 'after, from a' }]]))
    const onB = await afterFailover(t, () => upload(b.url, [['file', { data: 'after, from b' }]]))
    const took = Date.now() - startedAt
    await traffic.stop()
    const { statuses } = traffic
    t.comment(`switchover done after ${switched} ms; both instances writing again after ${took} ms; answers ${JSON.stringify(Object.fromEntries(statuses))}`)
    t.equal(onA.status, 200)
    t.equal(onB.status, 200)
    t.equal(await (await fetch(`${b.url}/download/${onA.body.code}`)).text(), 'after, from a')
    t.equal(await (await fetch(`${a.url}/download/${onB.body.code}`)).text(), 'after, from b')
    const newMaster = await sentinel.node(sentinel.replicaPort)
    t.teardown(() => newMaster.disconnect())
    for (const code of [onA.body.code, onB.body.code]) {
      t.equal((await newMaster.keys(`*${code}*`)).length, 1, `the record of ${code} is on the new master`)
    }
    t.same([...statuses.keys()].filter(s => s !== 200 && s !== 503), [], 'only 200 and 503 during the switchover')
    t.ok((statuses.get(200) ?? 0) > 0, 'downloads were served around it')
  })
}
