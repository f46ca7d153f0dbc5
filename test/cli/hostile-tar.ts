/**
 * Tar archives of any shape, as a hostile tool writes them: node-tar's own header encoder, one
 * 512-byte header per entry in the order given, bodies padded to 512 bytes, two zero blocks at
 * the end. (node-tar's `create` reads a real tree and would not write a device, a FIFO, a
 * `../` path or a link to a link in an arbitrary order.)
 */
import { gzipSync } from 'node:zlib'
import { Header, type types } from 'tar'

export interface TarEntry {
  path: string
  /** Default 'File'. */
  type?: types.EntryTypeName
  linkpath?: string
  body?: Buffer | string
}

export const file = (path: string, body: Buffer | string = 'x'): TarEntry => ({ path, body })
export const dir = (path: string): TarEntry => ({ path, type: 'Directory' })
export const symlink = (path: string, linkpath: string): TarEntry => ({ path, type: 'SymbolicLink', linkpath })
export const hardlink = (path: string, linkpath: string): TarEntry => ({ path, type: 'Link', linkpath })

export function tarBytes (entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = []
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '')
    const type = e.type ?? 'File'
    const header = new Header({ path: e.path, type, linkpath: e.linkpath ?? '', size: body.length, mode: type === 'Directory' ? 0o755 : 0o644, mtime: new Date(1_700_000_000_000), uid: 0, gid: 0 })
    header.encode()
    blocks.push(header.block!, body, Buffer.alloc((512 - (body.length % 512)) % 512))
  }
  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}

/** A tar.gz with one file of `size` zero bytes: a few hundred KiB that inflate a thousandfold. */
export const gzipBomb = (name: string, size: number) => gzipSync(tarBytes([file(name, Buffer.alloc(size))]), { level: 9 })
