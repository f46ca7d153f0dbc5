/**
 * `dropcode info` and `delete`, and what a download needs from them: the HEAD that names the
 * file (counting nothing), the name from Content-Disposition, the digest from Repr-Digest.
 */
import type { IncomingMessage } from 'node:http'
import { cleanFilename } from '../core/filename.js'
import { isCode } from '../core/ids.js'
import type { CodeArgs, DownloadArgs } from './args.js'
import { CliError, EXIT } from './exit-codes.js'
import { ERROR_HEADER, type DeleteAnswer } from '../api/answers.js'
import { answerError, fromService, readAll, type Client } from './http.js'

export interface FileInfo {
  code: string
  name: string
  size: number
  content_type: string
  /** Hex; '' when the service sent no Repr-Digest. */
  sha256: string
}

/** The name in a Content-Disposition header (filename* first), reduced to a safe base name. */
export function dispositionName (header: string | undefined): string {
  const star = /filename\*\s*=\s*UTF-8''([^;\s]+)/i.exec(header ?? '')
  if (star !== null) {
    try { return cleanFilename(decodeURIComponent(star[1]!)) } catch { /* malformed: use the fallback */ }
  }
  const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(header ?? '')
  return cleanFilename(plain?.[1]?.replace(/\\(.)/g, '$1') ?? plain?.[2])
}

export const hexDigest = (header: string | string[] | undefined) => {
  const m = /sha-256=:([A-Za-z0-9+/=]+):/.exec([header].flat()[0] ?? '')
  return m !== null ? Buffer.from(m[1]!, 'base64').toString('hex') : ''
}

export function checkCode (code: string) {
  if (!isCode(code)) throw new CliError(EXIT.USAGE, `"${code}" is not a download code (6 letters and digits)`)
}

/** Why a lookup of `code` at `url` failed: no such file (4), or an answer of something else (7). */
export async function failed (res: IncomingMessage, code: string, url?: URL): Promise<never> {
  await readAll(res, 1 << 16).catch(() => Buffer.alloc(0))
  // A proxy's 404 (a wrong path prefix in --url, say) says nothing about the code.
  if (res.statusCode === 404 && fromService(res.headers) && res.headers[ERROR_HEADER] !== 'DROPCODE_ROUTE_NOT_FOUND') throw new CliError(EXIT.NOT_FOUND, `no file with code ${code}: unknown, expired, used up or deleted`)
  throw answerError(res.statusCode!, res.headers, {}, res.statusMessage, url)
}

export async function info (args: CodeArgs | DownloadArgs, client: Client): Promise<FileInfo> {
  checkCode(args.code)
  return await client.retrying('info', async () => {
    const res = await client.exchange('HEAD', `/download/${args.code}`, {})
    if (res.statusCode !== 200) await failed(res, args.code, client.url(`/download/${args.code}`))
    res.resume()
    return {
      code: args.code,
      name: dispositionName(res.headers['content-disposition']),
      size: Number(res.headers['content-length']),
      content_type: res.headers['content-type'] ?? '',
      sha256: hexDigest(res.headers['repr-digest'])
    }
  })
}

export async function remove (args: CodeArgs, client: Client): Promise<string> {
  checkCode(args.code)
  const answer = await client.json<DeleteAnswer>('delete', 'DELETE', `/delete/${args.code}`)
  return answer.message
}
