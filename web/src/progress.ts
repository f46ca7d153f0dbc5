/** The upload's progress for people: the bar, bytes, percent, rate and time left. */
import { $, setText } from './dom.js'
import { formatBytes, formatDuration } from './format.js'
import type { Progress } from './upload.js'

/**
 * The progress bar and its text: bytes, percent, rate and time left. The bar follows every
 * event; the text is written at most four times a second (and once more after the last event).
 * While the upload waits (offline, busy) the text says so instead of a rate.
 */
export class ProgressText {
  private rate = new RateMeter()
  private latest: Progress | undefined
  private waiting = false
  private lastPaint = 0
  private timer: number | undefined

  update (p: Progress): void {
    this.latest = p
    this.rate.add(performance.now(), p.transferred)
    const bar = $<HTMLProgressElement>('progress')
    bar.max = Math.max(1, p.total)
    bar.value = p.total === 0 ? 1 : p.done
    this.schedule()
  }

  pause (waiting: boolean): void {
    if (waiting === this.waiting) return
    this.waiting = waiting
    // The time spent waiting is no measure of the rate.
    if (!waiting) this.rate = new RateMeter()
    this.schedule()
  }

  stop (): void {
    clearTimeout(this.timer)
    this.timer = undefined
    this.latest = undefined
    this.lastPaint = 0
    setText('progress-text', '')
  }

  private schedule (): void {
    if (this.timer !== undefined) return
    const due = Math.max(0, this.lastPaint + 250 - performance.now())
    this.timer = window.setTimeout(() => {
      this.timer = undefined
      this.paint()
    }, due)
  }

  private paint (): void {
    const p = this.latest
    if (p === undefined) return
    this.lastPaint = performance.now()
    const pct = p.total === 0 ? 100 : Math.floor((p.done / p.total) * 100)
    const parts = [`${formatBytes(p.done)} of ${formatBytes(p.total)} (${pct} %)`]
    const bytesPerSecond = this.rate.perSecond()
    if (this.waiting) parts.push('paused')
    else if (bytesPerSecond > 0) {
      parts.push(`${formatBytes(Math.round(bytesPerSecond))}/s`)
      if (p.done < p.total) parts.push(`about ${formatDuration((p.total - p.done) / bytesPerSecond)} left`)
    }
    setText('progress-text', parts.join(' · '))
  }
}

/** Bytes per second over the last few seconds of transfer. */
class RateMeter {
  private samples: Array<[ms: number, bytes: number]> = []

  add (ms: number, bytes: number): void {
    this.samples.push([ms, bytes])
    while (this.samples.length > 2 && ms - this.samples[0]![0] > 5000) this.samples.shift()
  }

  perSecond (): number {
    if (this.samples.length < 2) return 0
    const [t0, b0] = this.samples[0]!
    const [t1, b1] = this.samples[this.samples.length - 1]!
    return t1 - t0 < 200 ? 0 : ((b1 - b0) * 1000) / (t1 - t0)
  }
}
