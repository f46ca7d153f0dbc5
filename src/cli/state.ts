/**
 * Resume state: one small JSON file per interrupted transfer under $XDG_CACHE_HOME/dropcode
 * (else ~/.cache/dropcode), named by a hash of what identifies the transfer (server URL and
 * input or output). Written before the first byte moves, removed when the transfer ends either
 * way; a stale or unreadable file is ignored.
 */
import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

export function cacheDir (env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CACHE_HOME
  return path.join(xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache'), 'dropcode')
}

export class StateFile<T extends object> {
  readonly file: string

  /** @param identity what makes two runs "the same transfer" (e.g. URL, path, size, mtime) */
  constructor (kind: 'upload' | 'download', identity: unknown[], dir = cacheDir()) {
    const id = createHash('sha256').update(JSON.stringify(identity)).digest('hex').slice(0, 32)
    this.file = path.join(dir, `${kind}-${id}.json`)
  }

  async read (): Promise<T | undefined> {
    try {
      return JSON.parse(await fs.readFile(this.file, 'utf8')) as T
    } catch {
      return undefined
    }
  }

  /** Written to a temporary name and renamed, so a kill never leaves half a file. */
  async write (value: T): Promise<void> {
    await fs.mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 })
    const tmp = `${this.file}.${process.pid}.tmp`
    await fs.writeFile(tmp, JSON.stringify(value), { mode: 0o600 })
    await fs.rename(tmp, this.file)
  }

  async remove (): Promise<void> {
    await fs.rm(this.file, { force: true })
  }
}
