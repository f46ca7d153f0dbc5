/**
 * The persistence of the local StateStore: an append-only JSON-lines journal in one directory,
 * guarded by a lock file so only one process uses it.
 *
 * - `record(op)` appends the operation synchronously (before the caller's promise resolves),
 *   then applies it to memory. Appends reach the OS page cache, not the disk: a process crash
 *   or restart loses nothing, a power loss may lose the last moments.
 * - At open the journal is replayed (a torn last line from a crash is skipped) and rewritten as
 *   a snapshot; later, when it holds several times more operations than live entries, it is
 *   rewritten again (temp file, fsync, rename), so it stays proportional to what is live.
 */
import fs from 'node:fs'
import path from 'node:path'

export interface JournalOptions<Op> {
  /** Applies one operation to the in-memory state (at replay and after each record). */
  apply (op: Op): void
  /** The operations that rebuild the current state (for compaction). */
  snapshot (): Op[]
  /** Number of live entries, to decide when compaction pays. */
  liveEntries (): number
}

export interface Journal<Op> {
  record (op: Op): void
  /** Closes the journal and releases the lock. */
  close (): void
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

export function openJournal<Op> (dir: string, opts: JournalOptions<Op>): Journal<Op> {
  fs.mkdirSync(dir, { recursive: true })
  const lockPath = path.join(dir, 'lock')
  const journalPath = path.join(dir, 'journal.jsonl')
  takeLock(lockPath)

  if (fs.existsSync(journalPath)) {
    for (const line of fs.readFileSync(journalPath, 'utf8').split('\n')) {
      if (line === '') continue
      let op: Op
      try { op = JSON.parse(line) as Op } catch { continue } // torn write at a crash
      opts.apply(op)
    }
  }

  let fd = fs.openSync(journalPath, 'a')
  let opsInJournal = 0
  const compact = () => {
    const tmp = `${journalPath}.tmp`
    const lines = opts.snapshot().map(op => JSON.stringify(op))
    const tfd = fs.openSync(tmp, 'w')
    fs.writeSync(tfd, lines.length > 0 ? lines.join('\n') + '\n' : '')
    fs.fsyncSync(tfd)
    fs.closeSync(tfd)
    fs.renameSync(tmp, journalPath)
    fs.closeSync(fd)
    fd = fs.openSync(journalPath, 'a')
    opsInJournal = lines.length
  }
  compact() // start from a snapshot: drops torn lines and replayed history

  return {
    record (op) {
      fs.writeSync(fd, JSON.stringify(op) + '\n')
      opts.apply(op)
      opsInJournal++
      if (opsInJournal > 10_000 && opsInJournal > 4 * opts.liveEntries()) compact()
    },
    close () {
      fs.closeSync(fd)
      fs.rmSync(lockPath, { force: true })
    }
  }
}
