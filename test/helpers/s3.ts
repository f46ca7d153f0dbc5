/**
 * The S3 endpoint of a test run, chosen here and nowhere else:
 *  1. S3_TEST_ENDPOINT when set (e.g. the MinIO of docker-compose; keys from
 *     S3_TEST_ACCESS_KEY_ID / S3_TEST_SECRET_ACCESS_KEY, default the compose ones);
 *  2. else a throw-away real S3: Ceph's radosgw on a one-node cluster, when installed;
 *  3. else the in-process s3rver, with a loud warning: it does not enforce S3's part rules.
 * Under CI=true a real S3 (1 or 2) is required: the run fails instead of falling back.
 * S3_TEST_BACKEND=s3rver forces the fallback (to check it on a machine that has radosgw).
 */
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { radosgwInstalled, startRadosgw } from './radosgw.js'

export interface TestS3 {
  kind: 'external' | 'radosgw' | 's3rver'
  endpoint: string
  accessKeyId: string
  secretAccessKey: string
  region: string
  /** True when the endpoint enforces S3's rules (EntityTooSmall, NoSuchUpload, …). */
  strict: boolean
  /** Environment for loadConfig selecting this endpoint and a fresh bucket. */
  env (): Record<string, string>
  stop (): Promise<void>
}

const freshBucket = () => `dropcode-test-${randomBytes(6).toString('hex')}`

/** @param opts.memstoreBytes RAM for the throw-away radosgw's objects (default 1 GiB) */
export async function startS3 (opts: { memstoreBytes?: number } = {}): Promise<TestS3> {
  const base = (kind: TestS3['kind'], endpoint: string, accessKeyId: string, secretAccessKey: string, stop: () => Promise<void>): TestS3 => ({
    kind,
    endpoint,
    accessKeyId,
    secretAccessKey,
    region: 'us-east-1',
    strict: kind !== 's3rver',
    env: () => ({
      STORAGE_DRIVER: 's3',
      S3_BUCKET: freshBucket(),
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: accessKeyId,
      S3_SECRET_ACCESS_KEY: secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true'
    }),
    stop
  })

  const external = process.env.S3_TEST_ENDPOINT
  if (external !== undefined && external !== '') {
    return base('external', external, process.env.S3_TEST_ACCESS_KEY_ID ?? 'dropcode', process.env.S3_TEST_SECRET_ACCESS_KEY ?? 'dropcode-secret', async () => {})
  }
  const forceS3rver = process.env.S3_TEST_BACKEND === 's3rver'
  if (radosgwInstalled() && !forceS3rver) {
    const rgw = await startRadosgw({ memstoreBytes: opts.memstoreBytes })
    return base('radosgw', rgw.endpoint, rgw.accessKeyId, rgw.secretAccessKey, () => rgw.stop())
  }
  if (process.env.CI === 'true') {
    throw new Error('CI=true needs a real S3 for the tests: install Debian\'s ceph-mon ceph-osd radosgw (.ci/run does) or set S3_TEST_ENDPOINT')
  }
  process.emitWarning('No real S3 for the tests (install ceph-mon ceph-osd radosgw, or set S3_TEST_ENDPOINT): ' +
    'falling back to s3rver, which does NOT enforce S3 part rules; S3 behaviour is only partly tested.')
  const { default: S3rver } = await import('s3rver')
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'dropcode-s3rver-'))
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory })
  const { port } = await server.run()
  return base('s3rver', `http://127.0.0.1:${port}`, 'S3RVER', 'S3RVER', async () => {
    await server.close()
    await fs.rm(directory, { recursive: true, force: true })
  })
}
