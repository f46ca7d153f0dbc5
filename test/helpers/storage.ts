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

/** What one item of `listStored` is; `key` is the 32-hex object key it belongs to. */
export type StoredItem =
  /** A whole object (fs: `ab/KEY`, or a part of a concatenated one, `ab/KEY.joined/N`; S3: `PREFIXKEY`). */
  | { kind: 'object', key: string }
  /** A chunk of a session's object (fs: `ab/KEY.chunks/INDEX-NONCE`; S3: `PREFIXKEY.chunk-INDEX-NONCE`). */
  | { kind: 'chunk', key: string, index: number }
  /** An unfinished multipart upload (S3: `unfinished:PREFIXKEY`). */
  | { kind: 'unfinished', key: string }
  /** Anything else (a `.part` file, a stray name). */
  | { kind: 'other', key: undefined }

/** Reads one name of `listStored(config)` by the layout of the config's storage driver. */
export function describeStored (config: Config, item: string): StoredItem {
  const storage = config.storage
  const layout = storage.driver === 'fs'
    ? /^()[0-9a-f]{2}\/([0-9a-f]{32})(?:\.chunks\/(\d+)-[0-9a-f]+|\.joined\/\d+)?$/
    : new RegExp(`^(unfinished:)?${storage.prefix.replace(/[.*()]/g, '\\$&')}([0-9a-f]{32})(?:\\.chunk-(\\d+)-[0-9a-f]+)?$`)
  const [, unfinished = '', key, index] = layout.exec(item) ?? []
  if (key === undefined || (unfinished !== '' && index !== undefined)) return { kind: 'other', key: undefined }
  if (unfinished !== '') return { kind: 'unfinished', key }
  return index !== undefined ? { kind: 'chunk', key, index: Number(index) } : { kind: 'object', key }
}
