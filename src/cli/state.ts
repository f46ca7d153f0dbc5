/**
 * Resume state: one small JSON file per interrupted transfer under $XDG_CACHE_HOME/dropcode
 * (else ~/.cache/dropcode), named by a hash of what identifies the transfer (server URL and
 * input or output). Written before the first byte moves, removed when the transfer ends either
 * way; a stale or unreadable file is ignored.
 *
 * A state file steers where bytes go (an upload session, a download's claim and file name), so
 * it is trusted only as the user's own: the directory must be a real directory (not a link)
 * owned by this user that neither group nor others can write, and the file a regular file owned
 * by this user. Otherwise the transfer runs without resume state (a warning says why): nothing
 * is read from there and nothing written. An upload's state is bound to its API key: the key's
 * SHA-256 (never the key) is part of the file's name and is stored in it, and a file written
 * for another key is ignored.
 */
import { createHash, randomBytes } from 'node:crypto'
import { constants } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

export function cacheDir (env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CACHE_HOME
  return path.join(xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache'), 'dropcode')
}

export interface StateOptions {
  /** The API key the transfer uses: the state is bound to it. */
  key?: string | undefined
  /** Where state lives (default cacheDir()). */
  dir?: string
  /** Says why state is not used (a distrusted directory, another key's file). */
  warn?: (message: string) => void
}

/** SHA-256 of the key, domain-separated so it matches no other hash of it. */
export const keyHash = (key: string) => createHash('sha256').update('dropcode resume state key\0').update(key).digest('hex')

const uid = process.getuid?.()
/** Why `st` is not this user's own, or nobody else's to write; undefined when it is. */
function foreign (st: { uid: number, mode: number }): string | undefined {
  if (uid === undefined) return undefined // Windows: no owners or mode bits to check
  if (st.uid !== uid) return `it belongs to uid ${st.uid}, not to this user (uid ${uid})`
  if ((st.mode & 0o022) !== 0) return `group or others can write it (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')})`
  return undefined
}

const warned = new Set<string>()

/** A StateOptions.warn that writes to stderr unless --quiet. */
export const stateWarning = (args: { quiet: boolean }) => (message: string) => {
  if (!args.quiet) process.stderr.write(`dropcode: warning: ${message}\n`)
}

export class StateFile<T extends object> {
  readonly file: string
  private readonly dir: string
  private readonly keySha256: string | undefined
  private readonly warn: (message: string) => void

  /** @param identity what makes two runs "the same transfer" (e.g. URL, path, size, mtime) */
  constructor (kind: 'upload' | 'download', identity: unknown[], { key, dir = cacheDir(), warn = () => {} }: StateOptions = {}) {
    this.keySha256 = key !== undefined ? keyHash(key) : undefined
    const id = createHash('sha256').update(JSON.stringify(this.keySha256 === undefined ? identity : [...identity, this.keySha256])).digest('hex').slice(0, 32)
    this.dir = dir
    this.file = path.join(dir, `${kind}-${id}.json`)
    this.warn = warn
  }

  /** A run reads its state more than once: each warning is said once. */
  private once (message: string): void {
    if (!warned.has(message)) this.warn(message)
    warned.add(message)
  }

  /** Whether the directory may hold state (a warning says why not). */
  private async trusted (): Promise<boolean> {
    const st = await fs.lstat(this.dir).catch(() => undefined)
    if (st === undefined) return false
    const why = st.isDirectory() ? foreign(st) : 'it is not a directory'
    if (why === undefined) return true
    this.once(`not using resume state in ${this.dir}: ${why}; this transfer cannot be resumed`)
    return false
  }

  async read (): Promise<T | undefined> {
    if (!await this.trusted()) return undefined
    let fh: fs.FileHandle
    try {
      fh = await fs.open(this.file, constants.O_RDONLY | constants.O_NOFOLLOW)
    } catch {
      return undefined
    }
    try {
      const st = await fh.stat()
      const why = st.isFile() ? foreign(st) : 'it is not a file'
      if (why !== undefined) {
        this.once(`ignoring resume state ${this.file}: ${why}`)
        return undefined
      }
      const { keySha256, ...value } = JSON.parse(await fh.readFile('utf8')) as T & { keySha256?: string }
      if (keySha256 !== this.keySha256) {
        this.once(`ignoring resume state ${this.file}: it was written for another API key`)
        return undefined
      }
      return value as T
    } catch {
      return undefined
    } finally {
      await fh.close()
    }
  }

  /** Written to a temporary name and renamed, so a kill never leaves half a file. */
  async write (value: T): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 }).catch(() => {})
    if (!await this.trusted()) return
    const tmp = `${this.file}.${randomBytes(6).toString('hex')}.tmp`
    await fs.writeFile(tmp, JSON.stringify(this.keySha256 === undefined ? value : { ...value, keySha256: this.keySha256 }), { mode: 0o600, flag: 'wx' })
    await fs.rename(tmp, this.file)
  }

  async remove (): Promise<void> {
    if (await this.trusted()) await fs.rm(this.file, { force: true })
  }
}
