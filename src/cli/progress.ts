/**
 * Progress on stderr: a redrawn bar (bytes, rate, ETA) on a terminal, one line per 10 % when
 * stderr is a file or a CI log, nothing with --quiet. Stdout stays for the result.
 */
const MiB = 1024 * 1024
const REDRAW_MS = 100

export interface Progress {
  /** `bytes` more are done (negative when a cut transfer restarts from an earlier point). */
  add (bytes: number): void
  /** `bytes` were done by an earlier run (resuming): counted, but not in the rate. */
  skip (bytes: number): void
  /** A one-line message (a retry, a resume), on its own line. */
  note (message: string): void
  done (): void
}

const human = (bytes: number) => bytes >= MiB ? `${(bytes / MiB).toFixed(1)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`
const duration = (s: number) => !Number.isFinite(s) ? '--' : s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(Math.floor(s) % 60).padStart(2, '0')}s` : `${Math.ceil(s)}s`

/** @param total bytes; undefined when unknown (stdin): bytes and rate only, one line at the end off a terminal */
export function progress (label: string, total: number | undefined, opts: { quiet: boolean, stream?: NodeJS.WriteStream }): Progress {
  const out = opts.stream ?? process.stderr
  if (opts.quiet) return { add () {}, skip () {}, note () {}, done () {} }
  const started = Date.now()
  let done = 0
  let skipped = 0
  let lastDraw = 0
  let lastDecile = 0
  const tty = out.isTTY === true
  const line = () => {
    const secs = (Date.now() - started) / 1000
    const rate = secs > 0 ? Math.max(0, done - skipped) / secs : 0
    if (total === undefined) return { pct: 0, text: `${human(done)} ${human(rate)}/s` } // stdin: size unknown
    const pct = total > 0 ? Math.min(100, Math.floor(done / total * 100)) : 100
    const eta = rate > 0 ? (total - done) / rate : Infinity
    return { pct, text: `${human(done)}/${human(total)} ${human(rate)}/s ETA ${duration(eta)}` }
  }
  const draw = (force: boolean) => {
    const { pct, text } = line()
    if (total === undefined) {
      if (tty && (force || Date.now() - lastDraw >= REDRAW_MS)) {
        lastDraw = Date.now()
        out.write(`\r${label} ${text}\x1b[K`)
      } else if (!tty && force) out.write(`${label} done: ${text}\n`)
    } else if (tty) {
      if (!force && Date.now() - lastDraw < REDRAW_MS) return
      lastDraw = Date.now()
      const width = 24
      const filled = Math.round(width * pct / 100)
      out.write(`\r${label} [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${String(pct).padStart(3)}% ${text}\x1b[K`)
    } else {
      const decile = Math.floor(pct / 10)
      if (decile > lastDecile || (force && decile === 10 && lastDecile < 10)) {
        lastDecile = decile
        out.write(`${label} ${decile * 10}% ${text}\n`)
      }
    }
  }
  return {
    add (bytes) {
      done = Math.max(0, done + bytes)
      draw(false)
    },
    skip (bytes) {
      skipped += bytes
      done += bytes
    },
    note (message) {
      out.write(`${tty ? '\r\x1b[K' : ''}${message}\n`)
      if (tty) draw(true)
    },
    done () {
      draw(true)
      if (tty) out.write('\n')
    }
  }
}
