/**
 * Streams of unknown length into S3 parts, with a fixed amount of memory.
 *
 * Why not @aws-sdk/lib-storage: it gathers each part as a list of the stream's small chunks and
 * then copies them into a fresh part-sized Buffer (Buffer.concat), so every part allocates a new
 * 8 MiB block while the old ones wait for the garbage collector; measured on one 1 GiB upload,
 * the server grew by ~100 MiB, and more with bigger files. Here every part is copied into one of
 * a fixed set of part-sized buffers (`PartBuffers`), shared by all uploads of the process and
 * reused for ever: upload memory is that pool, whatever the file sizes or the number of uploads.
 * An upload that finds the pool empty waits for a buffer (its client is slowed by TCP flow
 * control); it never allocates beyond it.
 *
 * `streamParts` cuts a stream into pieces of `partSize` bytes, up to `concurrency` in flight per
 * stream. A full piece is sent once the next one holds `holdBack` bytes (at least one), so the
 * final piece is never smaller than `holdBack` unless it is the only one (S3's 5 MiB minimum for
 * non-final parts, for chunks stored as parts): a short tail goes out joined to the piece before
 * it. A stream that fits in one piece is stored whole (`sendWhole`, one PutObject). Each stream
 * holds two buffers at most while it reads, plus those of its pieces in flight.
 */
import { Readable } from 'node:stream'

/**
 * A process-wide pool of part-sized buffers. A stream takes two at once when it starts (so it
 * can always make progress: one piece in the air, one filling) and borrows more only while some
 * are free; streams waiting for their two hold nothing, so streams never wait on each other.
 */
export class PartBuffers {
  private readonly free: Buffer[] = []
  private readonly waiting: Array<{ n: number, resolve: (b: Buffer[]) => void }> = []
  private allocated = 0
  private lastUse = Date.now()
  private readonly trim: NodeJS.Timeout

  /**
   * @param partSize bytes per buffer
   * @param max buffers at most, ≥ 2 (the pool's memory is max × partSize)
   * @param idleMs buffers unused this long are given back to the system
   */
  constructor (readonly partSize: number, readonly max: number, idleMs = 5000) {
    if (max < 2) throw new Error('a part buffer pool needs at least two buffers')
    this.trim = setInterval(() => {
      if (Date.now() - this.lastUse < idleMs) return
      this.allocated -= this.free.length
      this.free.length = 0
    }, idleMs)
    this.trim.unref()
  }

  private take (n: number): Buffer[] | undefined {
    if (this.free.length + (this.max - this.allocated) < n) return undefined
    const out: Buffer[] = []
    while (out.length < n && this.free.length > 0) out.push(this.free.pop()!)
    while (out.length < n) { this.allocated++; out.push(Buffer.allocUnsafe(this.partSize)) }
    return out
  }

  /** `n` buffers at once, as soon as that many are free (first come, first served). */
  async acquire (n: number): Promise<Buffer[]> {
    this.lastUse = Date.now()
    const now = this.waiting.length === 0 ? this.take(n) : undefined
    if (now !== undefined) return now
    return await new Promise(resolve => this.waiting.push({ n, resolve }))
  }

  /** One more buffer if one is free right now (nobody is waiting), else undefined. */
  tryAcquire (): Buffer | undefined {
    return this.waiting.length === 0 ? this.take(1)?.[0] : undefined
  }

  release (...buffers: Buffer[]): void {
    this.lastUse = Date.now()
    this.free.push(...buffers)
    while (this.waiting.length > 0) {
      const got = this.take(this.waiting[0]!.n)
      if (got === undefined) break
      this.waiting.shift()!.resolve(got)
    }
  }

  /** Buffers allocated, in use or kept (for tests and metrics). */
  get size (): number { return this.allocated }

  close (): void { clearInterval(this.trim) }
}

export interface StreamPartsOptions {
  pool: PartBuffers
  /** Pieces of one stream uploaded at once. */
  concurrency: number
  /** Bytes the last piece must hold unless it is the only one (0: any size). */
  holdBack: number
  /** Bytes the stream may hold at most; more rejects with `tooLarge()`. */
  maxBytes?: number
  tooLarge?: () => Error
  /** Uploads piece `index` (0-based); `body` is only valid until the promise settles. */
  sendPart (index: number, body: Buffer | Readable, length: number): Promise<void>
  /** Stores a stream that fits in one piece, instead of sendPart(0); absent: sendPart(0). */
  sendWhole?: (body: Buffer) => Promise<void>
}

/**
 * Cuts `source` into pieces and sends them. Rejects with the source's own error if the source
 * failed, else with the first send's error, after every piece in flight has settled.
 * @returns bytes read and pieces sent
 */
export async function streamParts (source: AsyncIterable<Buffer>, opts: StreamPartsOptions): Promise<{ size: number, pieces: number }> {
  const { pool, holdBack } = opts
  const partSize = pool.partSize
  const inFlight = new Set<Promise<void>>()
  // This stream's buffers: two reserved at the start, more borrowed while the pool has them.
  const own: Buffer[] = []
  let wake: (() => void) | undefined
  const giveBack = (...bs: Buffer[]) => { own.push(...bs); wake?.() }
  const next = async (): Promise<Buffer> => {
    while (true) {
      const b = own.pop() ?? pool.tryAcquire()
      if (b !== undefined) return b
      await new Promise<void>(resolve => { wake = resolve })
      wake = undefined
    }
  }
  let held: Buffer[] = []
  let sendError: unknown
  let pieces = 0
  let size = 0
  /** A full piece waiting for the next one to reach `holdBack`. */
  let pending: Buffer | undefined
  let buf: Buffer | undefined
  let fill = 0
  // A full piece waits for at least one more byte: a stream that fits exactly in one piece is
  // then still stored whole.
  const threshold = Math.max(holdBack, 1)

  const send = async (body: Buffer | Readable, length: number, release: Buffer[]) => {
    while (inFlight.size >= opts.concurrency) await Promise.race(inFlight)
    if (sendError !== undefined) { giveBack(...release); throw sendError }
    const index = pieces++
    const p = opts.sendPart(index, body, length)
      .catch(err => { sendError ??= err })
      .finally(() => { giveBack(...release); inFlight.delete(p) })
    inFlight.add(p)
  }

  try {
    held = await pool.acquire(2)
    own.push(...held)
    buf = await next()
    for await (const chunk of source) {
      let offset = 0
      while (offset < chunk.length) {
        if (sendError !== undefined) throw sendError
        const n = Math.min(chunk.length - offset, partSize - fill)
        chunk.copy(buf, fill, offset, offset + n)
        fill += n
        offset += n
        size += n
        if (opts.maxBytes !== undefined && size > opts.maxBytes) throw opts.tooLarge!()
        if (pending !== undefined && fill >= threshold) {
          const full = pending
          pending = undefined
          await send(full, partSize, [full])
        }
        if (fill === partSize) {
          pending = buf
          buf = undefined
          buf = await next()
          fill = 0
        }
      }
    }
    // The end: what is left is the last piece (joined to the pending one when too short).
    const last = buf
    const whole = pieces === 0 && opts.sendWhole !== undefined
    if (pending !== undefined && fill > 0) {
      // fill < holdBack here (else the pending piece went out already): one piece of both.
      const full = pending
      pending = buf = undefined
      await send(Readable.from([full, last.subarray(0, fill)]), partSize + fill, [full, last])
    } else if (pending !== undefined) {
      if (whole) await opts.sendWhole!(pending)
      else {
        const full = pending
        pending = undefined
        await send(full, partSize, [full])
      }
    } else if (whole) {
      await opts.sendWhole!(last.subarray(0, fill))
    } else if (fill > 0) {
      buf = undefined
      await send(last.subarray(0, fill), fill, [last])
    }
    if (whole) pieces = 1
    await Promise.all(inFlight)
    if (sendError !== undefined) throw sendError
    return { size, pieces }
  } finally {
    await Promise.allSettled(inFlight)
    // Every buffer this stream holds (its own, borrowed, or not yet handed out) goes back.
    const mine = new Set([...own, ...(buf !== undefined ? [buf] : []), ...(pending !== undefined ? [pending] : [])])
    if (mine.size > 0) pool.release(...mine)
  }
}
