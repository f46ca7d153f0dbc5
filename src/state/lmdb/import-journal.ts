/**
 * One-time import of the journal that dropcode ≤ 0.1 kept in DATA_DIR/state/journal.jsonl, so
 * nobody upgrading loses a file. The journal is read as a stream, line by line (it may be far
 * larger than a JavaScript string can hold), and its operations are replayed in order into LMDB,
 * a thousand per transaction. Every operation sets state absolutely (a value, not a delta), so
 * an import cut short by a crash is simply done again from the start at the next open. Once
 * done, the journal is renamed to `journal.jsonl.imported-<time>` and kept aside; the old lock
 * file is removed.
 */
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import path from 'node:path'
import { createInterface } from 'node:readline'
import type { FastifyBaseLogger } from 'fastify'
import { fileOwner, sessionOwner, type UploadSession } from '../../core/model.js'
import type { LmdbEnv } from './env.js'

interface OldFile { code: string, blobKey: string, filename: string, contentType: string, size: number, maxDownloads: number, downloads: number, createdAt: number, expiresAt: number }
type OldSession = Omit<UploadSession, 'sha256'>
type Op =
  | { t: 'f', f: OldFile }
  | { t: 'd', c: string, n: number }
  | { t: 'x', c: string }
  | { t: 'b', k: string, at: number }
  | { t: 'u', k: string }
  | { t: 's', s: OldSession, until: number }
  | { t: 'sc', i: string, n: number, r: string, until: number }
  | { t: 'scx', i: string, n: number }
  | { t: 'sx', i: string }
  | { t: 'dn', i: string, c: string, until: number }

const BATCH = 1000

export async function importJournal (opts: { dir: string, env: LmdbEnv, sessions: { removeNow (id: string): void }, graceMs: number, log?: FastifyBaseLogger | undefined }): Promise<void> {
  const { env } = opts
  const journal = path.join(opts.dir, 'journal.jsonl')
  if (!fs.existsSync(journal)) return

  const schedule = (blobKey: string, deadline: number | undefined, owner?: string) => {
    const old = env.cleanup.get(blobKey)
    const at = deadline ?? old?.deadline ?? 0
    if (old !== undefined) env.due.remove([old.deadline, blobKey])
    const owners = old?.owners ?? []
    env.cleanup.put(blobKey, { deadline: at, owners: owner === undefined || owners.includes(owner) ? owners : [...owners, owner] })
    env.due.put([at, blobKey], 1)
  }
  const apply = (op: Op) => {
    switch (op.t) {
      case 'f': {
        const prev = env.files.get(op.f.code)
        const retainUntil = op.f.expiresAt + opts.graceMs
        env.files.put(op.f.code, { ...op.f, sha256: '', retainUntil, claims: prev?.claims ?? {} })
        env.reindex('f', op.f.code, prev?.retainUntil, retainUntil)
        schedule(op.f.blobKey, undefined, fileOwner(op.f.code))
        break
      }
      case 'd': { const f = env.files.get(op.c); if (f) env.files.put(op.c, { ...f, downloads: op.n }); break }
      case 'x': { const f = env.files.get(op.c); if (f) { env.files.remove(op.c); env.expiry.remove([f.retainUntil, 'f', op.c]) } break }
      case 'b': schedule(op.k, op.at); break
      case 'u': { const c = env.cleanup.get(op.k); if (c) { env.due.remove([c.deadline, op.k]); env.cleanup.remove(op.k) } break }
      case 's': {
        const prev = env.sessions.get(op.s.id)
        env.sessions.put(op.s.id, { session: { ...op.s, sha256: '' }, until: op.until, state: 'open', leaseUntil: 0, bytes: prev?.bytes ?? 0, received: prev?.received ?? 0 })
        env.reindex('s', op.s.id, prev?.until, op.until)
        schedule(op.s.blobKey, undefined, sessionOwner(op.s.id))
        break
      }
      case 'sc': {
        const s = env.sessions.get(op.i)
        if (s === undefined) break
        const prev = env.chunks.get([op.i, op.n])
        const size = (JSON.parse(op.r) as { size: number }).size
        env.chunks.put([op.i, op.n], { size, sha256: '', receipt: op.r })
        env.sessions.put(op.i, { ...s, until: op.until, bytes: s.bytes + size - (prev?.size ?? 0), received: s.received + (prev === undefined ? 1 : 0) })
        env.reindex('s', op.i, s.until, op.until)
        break
      }
      case 'scx': {
        const s = env.sessions.get(op.i)
        const prev = env.chunks.get([op.i, op.n])
        if (s === undefined || prev === undefined) break
        env.chunks.remove([op.i, op.n])
        env.sessions.put(op.i, { ...s, bytes: s.bytes - prev.size, received: s.received - 1 })
        break
      }
      case 'sx': opts.sessions.removeNow(op.i); break
      case 'dn': env.done.put(op.i, { code: op.c, until: op.until }); env.expiry.put([op.until, 'd', op.i], 1); break
    }
  }

  let count = 0
  let batch: Op[] = []
  const flush = async () => {
    const ops = batch
    batch = []
    await env.write(() => { for (const op of ops) apply(op) })
  }
  for await (const line of createInterface({ input: fs.createReadStream(journal), crlfDelay: Infinity })) {
    if (line === '') continue
    let op: Op
    try { op = JSON.parse(line) as Op } catch { continue } // a torn last line from a crash
    batch.push(op)
    count++
    if (batch.length >= BATCH) await flush()
  }
  await flush()
  const aside = `${journal}.imported-${new Date().toISOString().replace(/[:.]/g, '-')}`
  await fsp.rename(journal, aside).catch(err => { if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err })
  await fsp.rm(path.join(opts.dir, 'lock'), { force: true })
  await fsp.rm(`${journal}.tmp`, { force: true })
  opts.log?.warn({ operations: count, keptAs: aside }, 'imported the state journal of an earlier version into LMDB')
}
