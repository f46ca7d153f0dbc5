/**
 * tus concatenation on S3: the final upload's object built from its partial uploads' objects.
 * When every source but the last holds at least S3's part minimum (5 MiB), each is copied inside
 * the bucket into the final key's multipart upload (UploadPartCopy, in ranges of at most 5 GiB,
 * S3's copy limit, split evenly so each is at least 5 MiB), `queueSize` copies at once: no byte
 * passes through the service, which hashes the result by reading it back. Otherwise (a short
 * partial in the middle cannot be a part) the sources are streamed through the service once, in
 * order, through the part writer (memory bounded by the slab pool, admitted at its gate like an
 * upload) and hashed on the way; the multipart upload is then aborted. Empty sources add nothing.
 */
import type { ByteRange } from '../../core/byte-range.js'
import type { PartRef, S3Api } from './api.js'
import { MIN_PART, streamObjects } from './chunks.js'

/** S3's largest UploadPartCopy range. */
const MAX_COPY = 5 * 1024 ** 3

/** `size` bytes as ranges of at most MAX_COPY, as even as can be. */
function ranges (size: number): ByteRange[] {
  const pieces = Math.ceil(size / MAX_COPY)
  const out: ByteRange[] = []
  for (let i = 0, at = 0; i < pieces; i++) {
    const end = Math.min(size, at + Math.ceil(size / pieces))
    out.push({ start: at, end: end - 1 })
    at = end
  }
  return out
}

/** `sources`: object names (prefixed) with their sizes. */
export async function concatenateObjects (s3: S3Api, key: string, uploadId: string, sources: Array<{ object: string, size: number }>): Promise<{ size: number, sha256?: string }> {
  const used = sources.filter(s => s.size > 0)
  const size = used.reduce((n, s) => n + s.size, 0)
  if (size === 0) {
    await s3.putEmpty(key)
    await s3.abortMultipart(key, uploadId).catch(() => {})
    return { size, sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' }
  }
  if (used.slice(0, -1).every(s => s.size >= MIN_PART)) {
    const copies = used.flatMap(s => ranges(s.size).map(range => ({ object: s.object, range })))
    const parts: PartRef[] = []
    let next = 0
    const worker = async () => {
      while (next < copies.length) {
        const i = next++
        const { object, range } = copies[i]!
        parts.push({ n: i + 1, etag: await s3.uploadPartCopy(key, uploadId, i + 1, object, range), size: range.end - range.start + 1 })
      }
    }
    await Promise.all(Array.from({ length: Math.min(s3.queueSize, copies.length) }, worker))
    await s3.completeMultipart(key, uploadId, parts.sort((a, b) => a.n - b.n))
    return { size }
  }
  const sha256 = await streamObjects(s3, key, used.map(s => s.object), size)
  await s3.abortMultipart(key, uploadId).catch(() => {})
  return { size, sha256 }
}
