/**
 * What the page keeps in the browser's localStorage: the API key (until the person forgets it)
 * and the chunked session in progress, so a reload can resume it. localStorage may be missing
 * or refuse writes (private modes, full quota): the page then works without remembering.
 */

const KEY = 'dropcode.apiKey'
const PENDING = 'dropcode.pending'

function read (name: string): string | null {
  try {
    return localStorage.getItem(name)
  } catch {
    return null
  }
}

function write (name: string, value: string | null): void {
  try {
    if (value === null) localStorage.removeItem(name)
    else localStorage.setItem(name, value)
  } catch { /* not remembered; everything else still works */ }
}

export const loadKey = (): string | null => read(KEY)
export const saveKey = (key: string): void => write(KEY, key)
export const forgetKey = (): void => write(KEY, null)

/** A chunked session that has started and not yet answered its code. */
export interface Pending {
  uploadId: string
  /** The file, to recognise it when the person picks it again after a reload. */
  name: string
  size: number
  lastModified: number
  /** Bytes per chunk (the last one may be shorter). */
  chunkSize: number
  totalChunks: number
  maxDownloads: number
  expiryHours: number
}

export function loadPending (): Pending | undefined {
  const raw = read(PENDING)
  if (raw === null) return undefined
  try {
    const p = JSON.parse(raw) as Partial<Pending>
    const ok = typeof p.uploadId === 'string' && typeof p.name === 'string' &&
      [p.size, p.lastModified, p.chunkSize, p.totalChunks, p.maxDownloads, p.expiryHours].every(n => typeof n === 'number')
    return ok ? p as Pending : undefined
  } catch {
    return undefined
  }
}

export const savePending = (p: Pending): void => write(PENDING, JSON.stringify(p))
export const clearPending = (): void => write(PENDING, null)

/** The same file on disk: name, size and modification time all match. */
export const isSameFile = (p: Pending, file: File): boolean =>
  p.name === file.name && p.size === file.size && p.lastModified === file.lastModified
