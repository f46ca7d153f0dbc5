/**
 * The LMDB environment of the embedded state driver (DATA_DIR/state/lmdb), its sub-databases
 * and the one way to write: `write(fn)`.
 *
 * Sub-databases (keys are ordered-binary, values msgpack):
 *   files     code → StoredFile (FileRecord + claims: claim id → resumable-until | 'r';
 *                                 served: claim id → bytes charged, see FileStore.charge)
 *   cleanup   object key → { deadline, owners }
 *   due       [deadline, object key] → 1           (cleanup entries by deadline)
 *   sessions  id → StoredSession (UploadSession + until, state, leaseUntil, bytes)
 *   chunks    [id, index] → ChunkRecord
 *   locks     [id, index] → { token, until }
 *   places    [key id, session id] → until        (open sessions per API key; an entry whose
 *                                                   until passed is free, and is dropped by the
 *                                                   next reserve of its key or with its session)
 *   done      id → StoredDone: { code, size, sha256, until, keyId, session, chunks } (answers
 *                                  repeated completes and verify of a completed session)
 *   counters  name → { count, until }
 *   keys      key name → ApiKeyRecord
 *   keyHashes hex SHA-256 of a secret → key name    (find; a hash opens at most one key)
 *   ledger    [key name, item] → { bytes, until }   (what each key holds; see KeyStore.account)
 *   ledgerDue [key name, until, item] → 1          (a key's items by end, so account drops the
 *                                                   ended ones without reading them all)
 *   ledgerTotals key name → { bytes, lastUsedAt }  (the sum of the key's items' bytes, ended
 *                                                   ones included until account drops them)
 *   expiry    [until, kind, id] → 1                (what housekeeping removes when: f file,
 *                                                   s session, d done, c counter)
 *
 * Transactions: `write(fn)` runs `fn` inside one LMDB write transaction, batched with others
 * and committed before the promise resolves (lmdb-js asynchronous transactions), so a returned
 * answer is never lost to a crash of the process. LMDB's write lock makes each transaction
 * atomic against every other writer, in this process or another process on the same
 * directory, which is why several processes may share a DATA_DIR safely. A callback that throws
 * after writing is not rolled back by lmdb-js, so every `fn` here reads and decides first and
 * writes last.
 *
 * lmdb-js options: `maxDbs: 32` because the default (12) is fewer than the sub-databases above
 * (it only sizes a table of open handles). `eventTurnBatching: false` because with event-turn
 * batching a commit that fails (a full disk) also rejects an internal promise nobody handles,
 * which would end the process; batching still happens, by transaction count and `commitDelay`.
 * Reads outside a transaction see a snapshot that lmdb-js renews each event turn.
 */
import fsp from 'node:fs/promises'
import { open, type Database, type RootDatabase } from 'lmdb'
import { DropcodeError, isOutOfSpace } from '../../core/errors.js'
import type { ApiKeyRecord, ChunkRecord, FileRecord, UploadSession } from '../../core/model.js'
import type { CompletedFile } from '../types.js'

export interface StoredFile extends FileRecord {
  /** claim id → resumable-until (epoch ms), or 'r' for a refunded claim id. */
  claims: Record<string, number | 'r'>
  /** claim id → bytes charged to it (its file's size when taken; absent for claims taken before claims were charged: 0). */
  served?: Record<string, number>
}

export interface StoredSession {
  session: UploadSession
  /** Idle expiry, epoch ms. */
  until: number
  state: 'open' | 'completing'
  /** Completion lease, epoch ms. */
  leaseUntil: number
  /** Token of the completion holding the lease (absent: none, or a completion by dropcode ≤ 0.1). */
  completer?: string
  /** Sum of the chunks' sizes. */
  bytes: number
  /** Number of chunk records. */
  received: number
}

/** A finished session: its result, and what verify still shows of it. */
export interface StoredDone extends CompletedFile {
  /** Epoch ms: answered until then. */
  until: number
  keyId?: string
  /** Absent for sessions finished by a version that kept only the result. */
  session?: { filename: string, totalChunks: number, maxDownloads: number, expiryHours: number }
  /** [index, size, sha256] of each chunk it was assembled from. */
  chunks?: Array<[number, number, string]>
}

/** One item of a key's ledger. */
export interface LedgerItem {
  bytes: number
  /** Epoch ms: holds nothing from then on. */
  until: number
}

export interface LedgerTotal {
  /** Bytes of every item in the ledger (see env.ts's layout). */
  bytes: number
  /** Epoch ms of the last accepted change with a quota (0: none). */
  lastUsedAt: number
}

export type ExpiryKind = 'f' | 's' | 'd' | 'c'

export interface LmdbEnv {
  root: RootDatabase
  files: Database<StoredFile, string>
  cleanup: Database<{ deadline: number, owners: string[] }, string>
  due: Database<1, [number, string]>
  sessions: Database<StoredSession, string>
  chunks: Database<ChunkRecord, [string, number]>
  locks: Database<{ token: string, until: number }, [string, number]>
  places: Database<number, [string, string]>
  done: Database<StoredDone, string>
  counters: Database<{ count: number, until: number }, string>
  expiry: Database<1, [number, ExpiryKind, string]>
  keys: Database<ApiKeyRecord, string>
  keyHashes: Database<string, string>
  ledger: Database<LedgerItem, [string, string]>
  ledgerDue: Database<1, [string, number, string]>
  ledgerTotals: Database<LedgerTotal, string>
  /** Runs `fn` in a write transaction; resolves with its result once committed. */
  write<T> (fn: () => T): Promise<T>
  /** File records plus session places: what LOCAL_STATE_MAX_RECORDS bounds. */
  recordCount (): number
  /** Moves an expiry index entry from `from` (if any) to `to`. Call inside `write`. */
  reindex (kind: ExpiryKind, id: string, from: number | undefined, to: number): void
  close (): Promise<void>
}

/** Disk-full or I/O trouble from a failed commit, as a catalogue error. */
async function commitError (dir: string, err: unknown): Promise<DropcodeError> {
  const inner = await ((err as { commitError?: Promise<unknown> }).commitError?.catch((e: unknown) => e) ?? Promise.resolve(err))
  let full = isOutOfSpace(inner)
  if (!full && (inner as { code?: unknown })?.code === 5) {
    // lmdb reports some writes past the end of a full filesystem as EIO: look at the disk.
    const stats = await fsp.statfs(dir).catch(() => undefined)
    full = stats !== undefined && stats.bavail * stats.bsize < 4 * 1024 * 1024
  }
  return full
    ? new DropcodeError('DROPCODE_STORAGE_FULL', undefined, undefined, { cause: inner })
    : new DropcodeError('DROPCODE_STATE_UNAVAILABLE', undefined, undefined, { cause: inner })
}

export async function openLmdbEnv (dir: string): Promise<LmdbEnv> {
  await fsp.mkdir(dir, { recursive: true })
  const root = open({ path: dir, maxDbs: 32, eventTurnBatching: false })
  const db = <V, K extends string | Array<string | number>>(name: string) => root.openDB<V, K>(name, {})
  let closed = false
  const env: LmdbEnv = {
    root,
    files: db('files'),
    cleanup: db('cleanup'),
    due: db('due'),
    sessions: db('sessions'),
    chunks: db('chunks'),
    locks: db('locks'),
    places: db('places'),
    done: db('done'),
    counters: db('counters'),
    expiry: db('expiry'),
    keys: db('keys'),
    keyHashes: db('keyHashes'),
    ledger: db('ledger'),
    ledgerDue: db('ledgerDue'),
    ledgerTotals: db('ledgerTotals'),
    async write (fn) {
      if (closed) throw new DropcodeError('DROPCODE_STATE_UNAVAILABLE')
      try {
        return await root.transaction(fn)
      } catch (err) {
        if (err instanceof DropcodeError) throw err
        throw await commitError(dir, err)
      }
    },
    recordCount () {
      const count = (d: { getStats (): unknown }) => (d.getStats() as { entryCount: number }).entryCount
      return count(env.files) + count(env.places)
    },
    reindex (kind, id, from, to) {
      if (from === to) return
      if (from !== undefined) env.expiry.remove([from, kind, id])
      env.expiry.put([to, kind, id], 1)
    },
    async close () {
      if (closed) return
      closed = true
      await root.close()
    }
  }
  return env
}
