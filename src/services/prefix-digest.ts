/**
 * The running SHA-256 of a chunked session's contiguous prefix (chunks 0…next−1), kept in this
 * instance's memory, so that /upload/complete does not read the whole file back to hash it.
 *
 * - A chunk that streams through this instance while the prefix ends right before it (its index
 *   is `next` and no other fold is under way) is folded as it streams: its bytes go into a copy
 *   of the prefix's hash beside the chunk's own meter, and the copy becomes the prefix once the
 *   store has acknowledged the chunk (Node's own hash on the hot path, no second pass).
 * - A chunk that arrived out of order, or while another was folding, is folded later, once the
 *   prefix reaches it after it was committed here. Its bytes are kept in memory as they stream
 *   (`retain`: references to the buffers on their way to storage, no copy), within a budget per
 *   instance (`retainBytes`) and for at most RETAIN_MS; at its turn those very buffers (the ones
 *   its recorded SHA-256 was computed from) are folded: one hash, no read. A chunk that did not
 *   fit (nothing more of it is kept once one buffer does not) is read back from storage instead
 *   where the store can (`BlobStore.readChunk`: fs, from the page cache), and its bytes must then
 *   hash to its recorded SHA-256 (a retry may have overwritten them), or the fold stops there;
 *   where it cannot (S3 parts), the prefix stops before it. With 4 chunks of 8 MiB in flight in
 *   order, a session keeps up to 3 of them at once.
 * - At completion, the prefix counts only if each folded chunk's identity (model.ts
 *   `chunkIdentity`) equals the committed record's of its index (so a chunk replaced after it was
 *   folded, or folded here but committed from elsewhere with other bytes, makes the prefix
 *   useless, never wrong): the completer hashes the rest of the assembled object from the
 *   prefix's end. Without a prefix (another instance got the chunks, or this one restarted) it
 *   reads the whole object, as before.
 * - An append of a resumable upload (appends.ts) folded as it streams is not hashed a second
 *   time for a digest of its own: its identity is the fold's running digest through its last
 *   byte (`ChunkRecord.through`), which no other bytes give. Appends that were not folded as
 *   they streamed are hashed on their own, as chunks are.
 *
 * Memory: one hash state and one 64-character digest per folded chunk per open session, for at
 * most MAX_SESSIONS sessions (the least recently used go first) and no longer than their idle
 * lifetime. A 1 GiB file in 8 MiB chunks holds about 10 KiB here.
 */
import { createHash, type Hash } from 'node:crypto'
import type { Readable } from 'node:stream'

const MAX_SESSIONS = 4096
/** A kept chunk whose turn has not come within this long is let go (its predecessor went elsewhere, or never came). */
const RETAIN_MS = 60_000

/** A chunk's bytes kept in memory for a later fold (see the top). */
export interface Retained {
  /** Keeps `data` (by reference) unless over budget, which lets go of everything kept. */
  add (data: Buffer): void
  /** The buffers kept, in order; undefined once they were let go. */
  held (): readonly Buffer[] | undefined
  release (): void
}

/**
 * Where a committed chunk's bytes are found at its turn: folded already as it streamed, kept in
 * memory (`retain`), or else read back from storage with `read`.
 */
export interface ChunkSource {
  folded?: boolean
  kept?: Retained
  read?: () => Readable
}

interface Prefix {
  /** SHA-256 over chunks 0…next−1. */
  hash: Hash
  next: number
  bytes: number
  /** The identity of each folded chunk (model.ts `chunkIdentity`), in index order. */
  digests: string[]
  /** A fold under way (as a chunk streams, or reading one back); at most one at a time. */
  folding: Promise<void> | undefined
  /** Chunks committed through this instance that the prefix has not reached. */
  waiting: Map<number, { sha256: string, size: number, kept: Retained | undefined, read: (() => Readable) | undefined }>
  /** Epoch ms of the last use. */
  used: number
}

/**
 * A fold as a chunk streams: `update` with its bytes, then `done` once stored (with the chunk's
 * identity: its SHA-256, or for an append the fold's own `running()` digest), or `fail`.
 */
export interface StreamFold {
  update (data: Buffer): void
  /** The SHA-256 of the session's bytes through those folded so far, hex (a copy is finished; the fold goes on). */
  running (): string
  done (identity: string, size: number): void
  fail (): void
}

/** What completion may use: a hash over the first `bytes`, checked against `digests`. */
export interface PrefixSnapshot {
  hash: Hash
  bytes: number
  digests: string[]
}

export type PrefixDigests = ReturnType<typeof createPrefixDigests>

export function createPrefixDigests (opts: { now: () => number, idleMs: number, retainBytes: number }) {
  const prefixes = new Map<string, Prefix>()
  let retainedBytes = 0
  /** Kept chunks, oldest first, to let go of those kept too long. */
  const kept = new Set<{ since: number, release: () => void }>()
  const drop = (p: Prefix) => { for (const w of p.waiting.values()) w.kept?.release(); p.waiting.clear() }

  function entry (id: string): Prefix {
    let p = prefixes.get(id)
    if (p !== undefined && opts.now() - p.used > opts.idleMs) {
      drop(p)
      prefixes.delete(id)
      p = undefined
    }
    if (p === undefined) {
      p = { hash: createHash('sha256'), next: 0, bytes: 0, digests: [], folding: undefined, waiting: new Map(), used: 0 }
      if (prefixes.size >= MAX_SESSIONS) {
        const [oldest, q] = prefixes.entries().next().value!
        drop(q)
        prefixes.delete(oldest)
      }
    } else {
      prefixes.delete(id) // re-inserted below: the Map's order is the order of last use
    }
    p.used = opts.now()
    prefixes.set(id, p)
    return p
  }

  const advance = (p: Prefix, hash: Hash, sha256: string, size: number) => {
    p.hash = hash
    p.next++
    p.bytes += size
    p.digests.push(sha256)
  }

  /** Folds waiting chunks read back from storage, in order, while the next one is there. */
  function catchUp (id: string, p: Prefix): void {
    if (p.folding !== undefined || prefixes.get(id) !== p) return
    const chunk = p.waiting.get(p.next)
    if (chunk === undefined) return
    p.waiting.delete(p.next)
    p.folding = (async () => {
      await new Promise(resolve => setImmediate(resolve)) // never inside its caller; I/O between chunks
      const hash = p.hash.copy()
      let size = 0
      const held = chunk.kept?.held()
      if (held !== undefined) {
        // The buffers this request hashed into the chunk's record as they streamed: no check needed.
        for (const data of held) {
          hash.update(data)
          size += data.length
        }
        if (size === chunk.size) advance(p, hash, chunk.sha256, size)
        return
      }
      if (chunk.read === undefined) return
      const own = createHash('sha256')
      for await (const data of chunk.read() as AsyncIterable<Buffer>) {
        hash.update(data)
        own.update(data)
        size += data.length
      }
      // Overwritten since (a retry under way): the prefix stops here until it is committed again.
      if (size === chunk.size && own.digest('hex') === chunk.sha256) advance(p, hash, chunk.sha256, size)
    })().catch(() => {}).finally(() => {
      chunk.kept?.release()
      p.folding = undefined
      catchUp(id, p)
    })
  }

  return {
    /** A fold for chunk `index` as it streams, when the prefix ends right before it; else undefined. */
    streamFold (id: string, index: number): StreamFold | undefined {
      const p = entry(id)
      if (p.next !== index || p.folding !== undefined) return undefined
      const hash = p.hash.copy()
      let settle!: () => void
      p.folding = new Promise<void>(resolve => { settle = resolve })
      let over = false
      const end = () => {
        over = true
        p.folding = undefined
        settle()
      }
      return {
        update: data => { if (!over) hash.update(data) },
        running: () => hash.copy().digest('hex'),
        done (identity, size) {
          if (over) return
          if (p.next === index) advance(p, hash, identity, size)
          end()
          catchUp(id, p)
        },
        fail: () => { if (!over) end() }
      }
    },

    /** Chunk `index` was committed through this instance: unless folded, it waits for the prefix to reach it. */
    committed (id: string, index: number, chunk: { sha256: string, size: number }, from: ChunkSource): void {
      const p = entry(id)
      const kept = from.kept?.held() === undefined ? undefined : from.kept
      if (from.folded === true || (kept === undefined && from.read === undefined) || index < p.next) { from.kept?.release(); return }
      p.waiting.get(index)?.kept?.release()
      p.waiting.set(index, { ...chunk, kept, read: from.read })
      catchUp(id, p)
    },

    /** Keeps chunk bytes as they stream, for a fold once the prefix reaches them (see the top). */
    retain (): Retained {
      const now = opts.now()
      for (const k of kept) {
        if (now - k.since <= RETAIN_MS) break
        k.release()
      }
      let buffers: Buffer[] | undefined = []
      let bytes = 0
      const self = {
        since: now,
        release () {
          if (buffers === undefined) return
          buffers = undefined
          retainedBytes -= bytes
          bytes = 0
          kept.delete(self)
        }
      }
      kept.add(self)
      return {
        add (data) {
          if (buffers === undefined) return
          if (retainedBytes + data.length > opts.retainBytes) { self.release(); return }
          buffers.push(data)
          bytes += data.length
          retainedBytes += data.length
        },
        held: () => buffers,
        release: self.release
      }
    },

    /**
     * The prefix as it stands once the folds under way have ended (a copy: the session may go
     * on), or undefined when there is none or they take longer than `waitMs`.
     */
    async snapshot (id: string, waitMs: number): Promise<PrefixSnapshot | undefined> {
      const p = prefixes.get(id)
      if (p === undefined) return undefined
      const deadline = opts.now() + waitMs
      while (p.folding !== undefined) {
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<boolean>(resolve => { timer = setTimeout(() => resolve(true), Math.max(0, deadline - opts.now())) })
        const timedOut = await Promise.race([p.folding.then(() => false), late])
        clearTimeout(timer)
        if (timedOut) return undefined
      }
      return { hash: p.hash.copy(), bytes: p.bytes, digests: [...p.digests] }
    },

    forget (id: string): void {
      const p = prefixes.get(id)
      if (p !== undefined) drop(p)
      prefixes.delete(id)
    },

    /** Bytes of chunks kept in memory now. */
    get retainedBytes (): number { return retainedBytes },

    /** Sessions held (for tests and metrics). */
    get size (): number { return prefixes.size }
  }
}
