/**
 * Local StateStore: the embedded default for a single process, persisted under DATA_DIR/state.
 *
 * Layout: `journal.jsonl`, one JSON operation per line, appended synchronously before the
 * operation's promise resolves; `lock` holds the owning process id. At open the journal is
 * replayed into two maps (code → record, object key → cleanup deadline). When the journal has
 * grown to several times the live data it is rewritten as a snapshot (temp file, fsync,
 * rename), so it stays proportional to what is live.
 *
 * Atomicity: the maps are only touched by synchronous code, so each operation is atomic with
 * respect to every other in the process (the same guarantee Redis gives with Lua). Only one
 * process may open a directory: the lock file is checked at open.
 *
 * Durability: appends go to the OS page cache (no fsync per operation), so a process crash or
 * restart loses nothing; a power loss may lose the last moments. A torn last line is skipped.
 *
 * Expiry is lazy (every read checks expiresAt) plus a purge every minute; the number of
 * records is bounded by LOCAL_STATE_MAX_RECORDS (DROPCODE_STATE_FULL beyond it).
 */
import fs from 'node:fs'
import path from 'node:path'
import { DropcodeError } from '../errors.js'
import type { Claim, FileRecord, Lookup, StateStore } from './state-store.js'

type Op =
  | { t: 'f', f: FileRecord } // put file
  | { t: 'd', c: string, n: number } // downloads := n
  | { t: 'x', c: string } // delete file
  | { t: 'b', k: string, at: number } // blob cleanup deadline := at
  | { t: 'u', k: string } // forget blob

export interface LocalStateStoreOptions {
  /** Directory for the journal and lock; created if missing. */
  dir: string
  /** Most file records held at once. */
  maxRecords: number
  /** Clock used by the background purge (epoch ms). */
  now?: () => number
  /** ms between purges of expired records; default 60 000. */
  purgeIntervalMs?: number
}

function takeLock (lockPath: string) {
  try {
    fs.writeFileSync(lockPath, String(process.pid), { flag: 'wx' })
    return
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  const pid = Number(fs.readFileSync(lockPath, 'utf8'))
  let alive = false
  try { alive = Number.isInteger(pid) && pid > 0 && process.kill(pid, 0) } catch { alive = false }
  if (alive) throw new Error(`state directory ${path.dirname(lockPath)} is in use by process ${pid}; each dropcode process with STATE_DRIVER=local needs its own DATA_DIR`)
  fs.writeFileSync(lockPath, String(process.pid)) // stale lock from a dead process
}

export async function openLocalStateStore (opts: LocalStateStoreOptions): Promise<StateStore> {
  const { dir, maxRecords } = opts
  const now = opts.now ?? Date.now
  fs.mkdirSync(dir, { recursive: true })
  const lockPath = path.join(dir, 'lock')
  const journalPath = path.join(dir, 'journal.jsonl')
  takeLock(lockPath)

  const files = new Map<string, FileRecord>()
  const blobs = new Map<string, number>()
  const apply = (op: Op) => {
    switch (op.t) {
      case 'f': files.set(op.f.code, op.f); break
      case 'd': { const f = files.get(op.c); if (f) files.set(op.c, { ...f, downloads: op.n }); break }
      case 'x': files.delete(op.c); break
      case 'b': blobs.set(op.k, op.at); break
      case 'u': blobs.delete(op.k); break
    }
  }

  let opsInJournal = 0
  if (fs.existsSync(journalPath)) {
    for (const line of fs.readFileSync(journalPath, 'utf8').split('\n')) {
      if (line === '') continue
      let op: Op
      try { op = JSON.parse(line) as Op } catch { continue } // torn write at a crash
      apply(op)
      opsInJournal++
    }
  }

  let fd = fs.openSync(journalPath, 'a')
  const compact = () => {
    const tmp = `${journalPath}.tmp`
    const lines: string[] = []
    for (const f of files.values()) lines.push(JSON.stringify({ t: 'f', f }))
    for (const [k, at] of blobs) lines.push(JSON.stringify({ t: 'b', k, at }))
    const tfd = fs.openSync(tmp, 'w')
    fs.writeSync(tfd, lines.length > 0 ? lines.join('\n') + '\n' : '')
    fs.fsyncSync(tfd)
    fs.closeSync(tfd)
    fs.renameSync(tmp, journalPath)
    fs.closeSync(fd)
    fd = fs.openSync(journalPath, 'a')
    opsInJournal = lines.length
  }
  const write = (op: Op) => {
    fs.writeSync(fd, JSON.stringify(op) + '\n')
    apply(op)
    opsInJournal++
    if (opsInJournal > 10_000 && opsInJournal > 4 * (files.size + blobs.size)) compact()
  }
  compact() // start from a snapshot: drops torn lines and replayed history

  const status = (code: string, at: number): Lookup => {
    const file = files.get(code)
    if (file === undefined) return { ok: false, reason: 'unknown' }
    if (at >= file.expiresAt) return { ok: false, reason: 'expired' }
    if (file.downloads >= file.maxDownloads) return { ok: false, reason: 'exhausted' }
    return { ok: true, file }
  }
  const purgeExpired = (at: number) => {
    for (const f of files.values()) if (at >= f.expiresAt) write({ t: 'x', c: f.code })
  }
  const timer = setInterval(() => purgeExpired(now()), opts.purgeIntervalMs ?? 60_000)
  timer.unref()
  let closed = false

  return {
    async createFile (file, blobDeadline) {
      const existing = files.get(file.code)
      if (existing !== undefined && now() < existing.expiresAt) return false
      if (files.size >= maxRecords) purgeExpired(now())
      if (files.size >= maxRecords) throw new DropcodeError('DROPCODE_STATE_FULL')
      write({ t: 'f', f: { ...file } })
      write({ t: 'b', k: file.blobKey, at: blobDeadline })
      return true
    },
    async lookupFile (code, at) {
      const s = status(code, at)
      return s.ok ? { ok: true, file: { ...s.file } } : s
    },
    async claimDownload (code, at): Promise<Claim> {
      const s = status(code, at)
      if (!s.ok) return s
      write({ t: 'd', c: code, n: s.file.downloads + 1 })
      const file = { ...files.get(code)! }
      return { ok: true, file, last: file.downloads >= file.maxDownloads }
    },
    async refundDownload (code) {
      const file = files.get(code)
      if (file !== undefined && file.downloads > 0) write({ t: 'd', c: code, n: file.downloads - 1 })
    },
    async deleteFile (code, at) {
      const s = status(code, at)
      if (!s.ok) return s
      write({ t: 'b', k: s.file.blobKey, at })
      write({ t: 'x', c: code })
      return { ok: true, file: { ...s.file } }
    },
    async scheduleBlobCleanup (blobKey, deadline) {
      write({ t: 'b', k: blobKey, at: deadline })
    },
    async leaseDueBlobs (at, limit, leaseUntil) {
      const due: string[] = []
      for (const [k, deadline] of blobs) {
        if (due.length >= limit) break
        if (deadline <= at) due.push(k)
      }
      for (const k of due) write({ t: 'b', k, at: leaseUntil })
      return due
    },
    async forgetBlob (blobKey) {
      if (blobs.has(blobKey)) write({ t: 'u', k: blobKey })
    },
    async countDueBlobs (at) {
      let n = 0
      for (const deadline of blobs.values()) if (deadline <= at) n++
      return n
    },
    async ping () {
      if (closed) throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE')
    },
    async close () {
      if (closed) return
      closed = true
      clearInterval(timer)
      fs.closeSync(fd)
      fs.rmSync(lockPath, { force: true })
    }
  }
}
