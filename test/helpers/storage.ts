import fs from 'node:fs'
import path from 'node:path'
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { createS3Client } from '../../src/blob/index.js'
import type { Config } from '../../src/config.js'

/**
 * Everything a config's storage holds: object keys, plus unfinished multipart uploads (S3) or
 * temp files (fs). Tests use it to show that failed requests leave nothing behind.
 */
export async function listStored (config: Config): Promise<string[]> {
  const storage = config.storage
  if (storage.driver === 'fs') {
    if (!fs.existsSync(storage.dir)) return []
    return fs.readdirSync(storage.dir, { recursive: true, withFileTypes: true })
      .filter(e => e.isFile()).map(e => path.relative(storage.dir, path.join(e.parentPath, e.name)))
  }
  const client = createS3Client(storage)
  try {
    const objects = await client.send(new ListObjectsV2Command({ Bucket: storage.bucket }))
    const out = (objects.Contents ?? []).map(o => o.Key!)
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: storage.bucket })).catch(() => ({ Uploads: [] }))
    for (const u of uploads.Uploads ?? []) out.push(`unfinished:${u.Key}`)
    return out
  } finally {
    client.destroy()
  }
}
