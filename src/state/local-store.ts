/**
 * Local StateStore: the embedded default for a single process, persisted under DATA_DIR/state.
 *
 * State lives in maps (code → record, object key → cleanup deadline, sessions, completed
 * sessions); every change is an operation recorded in the journal (local-journal.ts: lock
 * file, synchronous appends, replay, compaction) before the caller's promise resolves.
 *
 * Atomicity: the maps are only touched by synchronous code, so each operation is atomic with
 * respect to every other in the process (the same guarantee Redis gives with Lua). Chunk locks,
 * completion leases and rate-limit counters are in memory only: no request survives a restart.
 *
 * Expiry is lazy (every read checks expiresAt) plus a purge every minute; the number of
 * records is bounded by LOCAL_STATE_MAX_RECORDS (DROPCODE_STATE_FULL beyond it).
 */
import { DropcodeError } from '../errors.js'
import { openJournal } from './local-journal.js'
import type { Claim, FileRecord, Lookup, StateStore, UploadSession } from './state-store.js'

interface LiveSession {
  session: UploadSession
  /** Idle expiry, epoch ms. */
  until: number
  chunks: Map<number, string>
  /** Sum of the receipts' sizes. */
  bytes: number
  /** In memory only: no request survives a restart, so neither do its locks. */
  locks: Map<number, number>
  completingUntil: number
}

type Op =
  | { t: 'f', f: FileRecord } // put file
  | { t: 'd', c: string, n: number } // downloads := n
  | { t: 'x', c: string } // delete file
  | { t: 'b', k: string, at: number } // blob cleanup deadline := at
  | { t: 'u', k: string } // forget blob
  | { t: 's', s: UploadSession, until: number } // put session (idle expiry `until`)
  | { t: 'sc', i: string, n: number, r: string, until: number } // chunk receipt
  | { t: 'scx', i: string, n: number } // forget chunk receipt
  | { t: 'sx', i: string } // delete session
  | { t: 'dn', i: string, c: string, until: number } // completed session → code

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

const receiptSize = (receipt: string | undefined) => receipt === undefined ? 0 : (JSON.parse(receipt) as { size: number }).size

export async function openLocalStateStore (opts: LocalStateStoreOptions): Promise<StateStore> {
  const { dir, maxRecords } = opts
  const now = opts.now ?? Date.now

  const files = new Map<string, FileRecord>()
  const blobs = new Map<string, number>()
  const sessions = new Map<string, LiveSession>()
  const done = new Map<string, { code: string, until: number }>()
  // Rate-limit counters are not journaled: a restart forgiving a minute of counts is harmless.
  const counters = new Map<string, { count: number, until: number }>()
  const apply = (op: Op) => {
    switch (op.t) {
      case 'f': files.set(op.f.code, op.f); break
      case 'd': { const f = files.get(op.c); if (f) files.set(op.c, { ...f, downloads: op.n }); break }
      case 'x': files.delete(op.c); break
      case 'b': blobs.set(op.k, op.at); break
      case 'u': blobs.delete(op.k); break
      case 's': {
        const live = sessions.get(op.s.id)
        if (live) { live.session = op.s; live.until = op.until } else sessions.set(op.s.id, { session: op.s, until: op.until, chunks: new Map(), bytes: 0, locks: new Map(), completingUntil: 0 })
        break
      }
      case 'sc': {
        const live = sessions.get(op.i)
        if (live === undefined) break
        live.bytes += receiptSize(op.r) - receiptSize(live.chunks.get(op.n))
        live.chunks.set(op.n, op.r)
        live.until = op.until
        break
      }
      case 'scx': {
        const live = sessions.get(op.i)
        if (live === undefined) break
        live.bytes -= receiptSize(live.chunks.get(op.n))
        live.chunks.delete(op.n)
        break
      }
      case 'sx': sessions.delete(op.i); break
      case 'dn': done.set(op.i, { code: op.c, until: op.until }); break
    }
  }

  const snapshot = (): Op[] => {
    const ops: Op[] = []
    for (const f of files.values()) ops.push({ t: 'f', f })
    for (const [k, at] of blobs) ops.push({ t: 'b', k, at })
    for (const { session, until, chunks } of sessions.values()) {
      ops.push({ t: 's', s: session, until })
      for (const [n, r] of chunks) ops.push({ t: 'sc', i: session.id, n, r, until })
    }
    for (const [i, { code, until }] of done) ops.push({ t: 'dn', i, c: code, until })
    return ops
  }
  const journal = openJournal<Op>(dir, { apply, snapshot, liveEntries: () => files.size + blobs.size + sessions.size })
  const write = (op: Op) => journal.record(op)

  const status = (code: string, at: number): Lookup => {
    const file = files.get(code)
    if (file === undefined) return { ok: false, reason: 'unknown' }
    if (at >= file.expiresAt) return { ok: false, reason: 'expired' }
    if (file.downloads >= file.maxDownloads) return { ok: false, reason: 'exhausted' }
    return { ok: true, file }
  }
  const purgeExpired = (at: number) => {
    for (const f of files.values()) if (at >= f.expiresAt) write({ t: 'x', c: f.code })
    for (const [id, live] of sessions) if (at >= live.until) write({ t: 'sx', i: id })
    for (const [id, d] of done) if (at >= d.until) done.delete(id) // dropped from the journal at the next compaction
    for (const [k, c] of counters) if (at >= c.until) counters.delete(k)
  }
  const liveSession = (id: string, at: number) => {
    const live = sessions.get(id)
    return live !== undefined && at < live.until ? live : undefined
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
    async createSession (session, timing) {
      write({ t: 's', s: { ...session }, until: timing.now + timing.ttlMs })
      write({ t: 'b', k: session.blobKey, at: timing.blobDeadline })
    },
    async getSession (id) {
      const live = liveSession(id, now())
      if (live === undefined) return null
      return { session: { ...live.session }, received: [...live.chunks.keys()].sort((a, b) => a - b) }
    },
    async beginChunk (id, index, lockUntil, timing) {
      const live = liveSession(id, timing.now)
      if (live === undefined) return { ok: false, reason: 'unknown' }
      if (live.completingUntil > timing.now) return { ok: false, reason: 'busy' }
      if ((live.locks.get(index) ?? 0) > timing.now) return { ok: false, reason: 'locked' }
      live.locks.set(index, lockUntil)
      write({ t: 's', s: live.session, until: timing.now + timing.ttlMs })
      write({ t: 'b', k: live.session.blobKey, at: timing.blobDeadline })
      return { ok: true, session: { ...live.session } }
    },
    async extendChunkLock (id, index, lockUntil) {
      const live = sessions.get(id)
      if (live?.locks.has(index) === true) live.locks.set(index, lockUntil)
    },
    async abortChunk (id, index) {
      const live = sessions.get(id)
      if (live === undefined) return null
      live.locks.delete(index)
      const previous = live.chunks.get(index) ?? null
      if (previous !== null) write({ t: 'scx', i: id, n: index })
      return previous
    },
    async commitChunk (id, index, receipt, timing) {
      const live = liveSession(id, timing.now)
      if (live === undefined) return null
      const previous = live.chunks.get(index) ?? null
      live.locks.delete(index)
      write({ t: 'sc', i: id, n: index, r: receipt, until: timing.now + timing.ttlMs })
      write({ t: 'b', k: live.session.blobKey, at: timing.blobDeadline })
      return { received: live.chunks.size, previous, bytes: live.bytes }
    },
    async settleLayout (id, wanted) {
      const live = liveSession(id, now())
      if (live === undefined) return undefined
      if (wanted !== undefined && live.session.layout === undefined) {
        write({ t: 's', s: { ...live.session, layout: wanted }, until: live.until })
      }
      return live.session.layout
    },
    async beginCompletion (id, at, leaseUntil) {
      const live = liveSession(id, at)
      if (live === undefined) {
        const d = done.get(id)
        return d !== undefined && at < d.until ? { status: 'done', code: d.code } : { status: 'unknown' }
      }
      if (live.completingUntil > at) return { status: 'busy' }
      for (const until of live.locks.values()) if (until > at) return { status: 'busy' }
      live.completingUntil = leaseUntil
      return { status: 'open', session: { ...live.session }, receipts: new Map(live.chunks) }
    },
    async releaseCompletion (id) {
      const live = sessions.get(id)
      if (live) live.completingUntil = 0
    },
    async finishSession (id, code, doneTtlMs) {
      write({ t: 'sx', i: id })
      write({ t: 'dn', i: id, c: code, until: now() + doneTtlMs })
    },
    async hitCounter (key, windowMs) {
      const at = now()
      let c = counters.get(key)
      if (c === undefined || at >= c.until) {
        if (counters.size >= maxRecords) purgeExpired(at)
        if (counters.size >= maxRecords) throw new DropcodeError('DROPCODE_STATE_FULL')
        c = { count: 0, until: at + windowMs }
        counters.set(key, c)
      }
      c.count++
      return { count: c.count, resetMs: c.until - at }
    },
    async peekCounter (key) {
      const at = now()
      const c = counters.get(key)
      return c === undefined || at >= c.until ? { count: 0, resetMs: 0 } : { count: c.count, resetMs: c.until - at }
    },
    async ping () {
      if (closed) throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE')
    },
    async close () {
      if (closed) return
      closed = true
      clearInterval(timer)
      journal.close()
    }
  }
}
