/**
 * The embedded state driver: LMDB (the `lmdb` package) under DATA_DIR/state/lmdb.
 *
 * - Durable and crash-safe through LMDB's transactions: an answer is given only after its
 *   transaction committed (see env.ts), and LMDB's copy-on-write pages never leave a torn
 *   state, so `kill -9` or a crash loses nothing that was answered. Commits are flushed to
 *   disk shortly after (lmdb-js overlappingSync), so a power loss may lose the last moments.
 * - Several processes may share one DATA_DIR: LMDB serialises writers across processes and its
 *   lock file belongs to LMDB (it never refuses a start because of a dead process).
 * - Restart is instant at any size: nothing is loaded into memory; every lookup reads the
 *   memory-mapped database.
 * - Housekeeping removes what has expired in small transactions (a few hundred entries each,
 *   yielding to the event loop between them), once a minute and at start.
 * - A full disk fails the write with DROPCODE_STORAGE_FULL and leaves the database as it was;
 *   writes succeed again when space returns.
 */
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { CounterStore, StateBackend } from '../types.js'
import { createLmdbCleanup } from './cleanup.js'
import { openLmdbEnv, type LmdbEnv } from './env.js'
import { createLmdbFiles } from './files.js'
import { createLmdbKeys } from './keys.js'
import { createLmdbSessions } from './sessions.js'

export interface LmdbBackendOptions {
  /** DATA_DIR/state; the database lives in `lmdb/` below it. */
  dir: string
  /** Most file records and open sessions held at once (DROPCODE_STATE_FULL beyond). */
  maxRecords: number
  /** Clock for housekeeping (epoch ms). */
  now: () => number
  log?: FastifyBaseLogger
  /** ms between housekeeping runs; default 60 000 (0: only on demand). */
  housekeepingMs?: number
}

/** Entries removed per housekeeping transaction: a few ms of work each. */
const PURGE_BATCH = 200

export type LmdbBackend = StateBackend & {
  /** Removes everything expired at `now`, in small transactions. @returns entries removed */
  purge (now: number): Promise<number>
  env: LmdbEnv
}

export async function openLmdbBackend (opts: LmdbBackendOptions): Promise<LmdbBackend> {
  const env = await openLmdbEnv(path.join(opts.dir, 'lmdb'))
  // purgeSome (below) is only called later, from inside a write.
  const sessions = createLmdbSessions(env, { maxRecords: opts.maxRecords, purgeRoom: (now, limit) => purgeSome(now, limit) })

  /** Removes up to `limit` expired entries; call inside env.write. */
  const purgeSome = (now: number, limit: number): number => {
    let n = 0
    for (const key of env.expiry.getKeys({ start: [0, 'c', ''], end: [now, 's', '\uffff'], limit })) {
      const [until, kind, id] = key
      env.expiry.remove(key)
      n++
      if (kind === 'f' && env.files.get(id)?.retainUntil === until) env.files.remove(id)
      else if (kind === 's' && env.sessions.get(id)?.until === until) sessions.removeNow(id)
      else if (kind === 'd' && env.done.get(id)?.until === until) env.done.remove(id)
      else if (kind === 'c' && env.counters.get(id)?.until === until) env.counters.remove(id)
    }
    return n
  }

  const keys = createLmdbKeys(env)
  const counters: CounterStore = {
    async incr (key, windowMs, now) {
      return await env.write(() => {
        const c = env.counters.get(key)
        const next = c === undefined || c.until <= now ? { count: 1, until: now + windowMs } : { count: c.count + 1, until: c.until }
        env.counters.put(key, next)
        env.reindex('c', key, c?.until, next.until)
        return { count: next.count, resetMs: next.until - now }
      })
    },
    async read (key, now) {
      const c = env.counters.get(key)
      return c === undefined || c.until <= now ? { count: 0, resetMs: 0 } : { count: c.count, resetMs: c.until - now }
    }
  }

  async function purge (now: number): Promise<number> {
    let total = 0
    while (true) {
      const n = await env.write(() => {
        const some = purgeSome(now, PURGE_BATCH)
        return some + keys.purgeLedgers(now, PURGE_BATCH - some)
      })
      total += n
      if (n < PURGE_BATCH) return total
    }
  }

  let running: Promise<unknown> | undefined
  const housekeeping = () => {
    running ??= purge(opts.now())
      .catch(err => opts.log?.warn({ err }, 'state housekeeping failed; retrying at the next run'))
      .finally(() => { running = undefined })
  }
  const interval = opts.housekeepingMs ?? 60_000
  const timer = interval > 0 ? setInterval(housekeeping, interval) : undefined
  timer?.unref()
  if (interval > 0) housekeeping()

  return {
    env,
    files: createLmdbFiles(env, { maxRecords: opts.maxRecords, purgeRoom: purgeSome }),
    cleanup: createLmdbCleanup(env),
    sessions,
    counters,
    keys,
    purge,
    async ping () {
      // A read proves the environment is open; writes report their own failures.
      env.files.getStats()
    },
    async close () {
      clearInterval(timer)
      await running
      await env.close()
    }
  }
}
