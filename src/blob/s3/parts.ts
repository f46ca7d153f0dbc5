/**
 * Streams of unknown length into S3 parts, in memory proportional to the bytes buffered.
 *
 * Why not @aws-sdk/lib-storage: it gathers each part as a list of the stream's small chunks and
 * then copies them into a fresh part-sized Buffer (Buffer.concat), so every part allocates a new
 * 8 MiB block while the old ones wait for the garbage collector; measured on one 1 GiB upload,
 * the server grew by ~100 MiB, and more with bigger files. Here bytes are copied into slabs
 * (64 KiB) from one pool per store (`SlabPool`, S3_UPLOAD_MEMORY bytes), shared by all uploads
 * and reused for ever; a piece (a future S3 part) is a list of slabs, sent as a stream over them
 * with its exact length. Nothing is concatenated, nothing is allocated beyond the pool.
 *
 * Why slabs and not part-sized buffers (issue 20): an upload holds only the slabs its buffered,
 * unsent bytes occupy, taken one at a time as bytes arrive, never ahead. A stalled upload that
 * has sent 64 KiB costs one slab, not a part buffer, so a few stalled clients cannot take the
 * pool from everyone else. An upload that finds no slab it may take waits: it stops reading its
 * source, which slows its client through TCP flow control; it is never refused.
 *
 * `streamParts` cuts a stream into pieces of `partSize` bytes, up to `concurrency` in flight per
 * stream. A full piece is sent once the next one holds `holdBack` bytes (at least one), so the
 * final piece is never smaller than `holdBack` unless it is the only one (S3's 5 MiB minimum for
 * non-final parts, for chunks stored as parts): a short tail goes out joined to the piece before
 * it. A stream that fits in one piece is stored whole (`sendWhole`, one PutObject).
 *
 * Deadlock freedom. Slabs can all end up in half-filled pieces that each need more before
 * anything can be sent. So the pool grants slabs like a banker. Each filling stream that holds
 * slabs has a `need`: the slabs it must still take before it can send something (the rest of
 * its current piece, plus the `holdBack` slabs of the next one that let a full piece go), capped
 * by what is left of the stream when an upper bound of its length is known (`maxLength`,
 * `maxBytes`); `held`: its slabs that come back only after it takes more. `F` = free slabs plus
 * `releasing` ones (in pieces in flight, or in pieces that go as soon as the bytes filling the
 * slabs already held arrive: they come back without the stream taking any). Sort the streams by
 * need, n1 ≤ n2 ≤ …; the state is safe when every stream i has n_i ≤ F + h_1 + … + h_(i−1):
 * even if the streams before it kept all they hold until they send everything, it gets its
 * need. A slab is granted only when the state after the grant is safe (a grant that lets a piece
 * go counts that piece as releasing at once; a stream whose remaining bytes fit in what it holds
 * counts all of it as releasing and leaves the order).
 * Why the smallest-need stream m can always proceed: safety gives n_m ≤ F, so a slab is free or
 * comes back from a piece in flight. Granting it keeps the state safe: F drops by one and h_m
 * grows by one, so every sum after m is unchanged, and n_m − 1 ≤ F − 1. If the grant lets m send
 * its full piece of P slabs (n_m was 1), F gains P − 1, m keeps its c ≥ 1 slabs of the next piece
 * and needs at most P more: whoever now sorts before m needs ≤ P ≤ F + P − 1, m itself too, and
 * the sums after m are unchanged (F + h_m before, F′ + c after, equal). If m's bytes fit in what
 * it holds, all its slabs join F and the sums after it are unchanged. Nothing else shrinks a
 * sum: arriving bytes change no need (they fill held slabs, and a known bound shrinks the rest
 * and the free space alike), a new stream holds nothing and enters the order with its first
 * (checked) grant, a stream leaving (end or error) moves its slabs into F, and a piece coming
 * back moves slabs from `releasing` to free. So, as long as sources deliver and S3
 * answers, some stream can always send, and memory is the pool: safety decides when, not
 * whether. A stream whose source stalls keeps what it holds (a partial piece cannot be sent);
 * if it is the one the others' safety counts on, they wait until its bytes come or the server's
 * stall guards drop its request. Waiting streams are served smallest need first, FIFO among
 * equals (a larger need is served first only when the smaller ones cannot be, safely).
 *
 * A `maxLength` must really be an upper bound (a request's Content-Length is): if a stream
 * exceeds it the bound is dropped and the argument above no longer covers that stream.
 *
 * The gate (admission before the body). What the pool does not count: the chunks an upload's
 * request streams hold before they reach `streamParts` (a socket read of up to 64 KiB sliced
 * through the HTTP parser, the multipart parser, each transform on the way, and the chunk
 * `streamParts` holds while it waits for a slab: measured at ~260 KiB per upload blocked on the
 * pool; 2,000 such uploads took 700–960 MiB). So an upload does not start reading its body until
 * the pool admits it (`SlabPool.admit`, called by the routes through `BlobStore.admit`): while it
 * waits at the gate nothing consumes the request, Node stops reading its socket after one read
 * and TCP slows the client; it is never refused. Admission is a promise of `first` =
 * min(⌈maxLength / slab⌉, 16, a piece) slabs (16 when the length is unknown), given only when
 * nobody is queued before it at the gate, no stream waits for a slab, and the state is safe with
 * the promise set aside. The stream takes its first slabs from its promise without a check, then
 * goes the normal way; so an admitted 1 MiB upload never waits for the pool and its pipeline
 * never fills. A promise must not let stalled clients lock the gate (issue 20): once a stream has
 * waited on its source (not on the pool) for `stallMs` (1 s), its unused promise goes back;
 * a stream that ends or fails gives it back at once.
 * The gate is FIFO; a waiter whose request closes or is aborted leaves it (a client that goes
 * after Node stopped reading its socket is noticed only when the stall guard cuts the connection,
 * or once admitted: its body fails at once and the promise goes back).
 * Promises in the proof: promised slabs are counted as handed out (not free; in F only as
 * `releasing`, like any held slab, when the stream's rest fits in them) and as slabs the
 * stream holds in its current piece (always its first: `first` ≤ a piece), with its need
 * computed as if they were there, empty; admission is the check of a grant of `first` slabs at
 * once (its need overstated: at most two pieces), and lowering a need keeps the state safe (the
 * first stream it now passes had its need covered by the same sum). Taking a promised slab
 * changes no holding, so it needs no check. Giving an unused promise of p slabs back turns
 * (n, h) into (n + p, h − p) and F into F + p: streams sorted before it are unchanged or gain p,
 * streams it now sorts after had n_j < n + p ≤ F + p + the sum before it, streams after it keep
 * their sums (p lost from h, p gained in F), and its own need grows by what F gained; a stream
 * whose rest fitted in its holding re-enters the order with a need ≤ p ≤ free slabs. So the
 * argument above holds with promises, and promised slabs are never free for others.
 */
import { Readable } from 'node:stream'

/** Bytes per slab. */
export const SLAB_SIZE = 64 * 1024

/** What a stream holds, for the banker's rule (see the header). */
interface Holding {
  /** Slabs to take before it can send something; undefined: not in the order (holds none, or finishing). */
  need: number | undefined
  /** Slabs that come back only after it takes more. */
  held: number
  /** Slabs that come back without it taking more. */
  rel: number
}

interface Waiter { claim: Claim, key: number, after: () => Holding, resolve: (b: Buffer) => void, reject: (err: unknown) => void }

/** An upload waiting at the gate. */
interface GateWaiter { claim: Claim, first: number, holding: Holding, resolve: (c: Claim) => void, reject: (err: unknown) => void, leave: () => void }

/** Slabs promised to a stream of unknown length (1 MiB), and to any stream at most. */
export const PROMISE_SLABS = 16
/** ms a stream may wait on its source before its unused promise goes back to the pool. */
export const PROMISE_STALL_MS = 1000

/**
 * One stream's account with the pool. A claim from `SlabPool.admit` is also the upload's ticket
 * at the gate: it carries the slabs promised to it until its stream takes them.
 */
export class Claim {
  /** @internal */ state: Holding = { need: undefined, held: 0, rel: 0 }
  /** @internal Promised slabs not taken yet (counted as handed out, in `state.held`). */
  promised = 0
  /** @internal Since when its stream waits on its source (undefined: it does not). */
  idleSince: number | undefined
  /** @internal Its holding once `promised` is 0 (set by its stream). */
  without: (() => Holding) | undefined
  constructor (private readonly pool: SlabPool) {}

  /** True while promised slabs are left. */
  get hasPromise (): boolean { return this.promised > 0 }

  /** One promised slab (no check: it was set aside). Only while `hasPromise`. */
  takePromised (): Buffer { return this.pool.takePromised(this) }

  /** Gives the unused promise back now (idempotent); `holding`: the stream's holding without it. */
  release (holding?: Holding): void { this.pool.unpromise(this, holding) }

  /**
   * A slab, once granting it leaves the pool safe. `need`: this stream's need now (its place in
   * the queue); `after`: its holding with the slab.
   */
  take (need: number, after: () => Holding): Buffer | Promise<Buffer> {
    return this.pool.take(this, need, after)
  }

  /** Stops waiting for a slab (the stream failed meanwhile): the pending take rejects with `err`. */
  cancel (err: unknown): void { this.pool.cancel(this, err) }

  /** New holding, without slabs changing hands (a piece sent, a bound dropped). */
  set (state: Holding): void { this.pool.set(this, state, []) }

  /** Gives slabs back (a piece stored, or everything at the end) and sets the new holding. */
  give (slabs: Buffer[], state: Holding): void { this.pool.set(this, state, slabs) }
}

/** A ticket of this module's gate, as a claim (anything else: none). */
export const ticketOf = (t: { release (): void } | undefined): Claim | undefined => t instanceof Claim ? t : undefined

/** Counts for metrics (all in bytes but `streamsWaiting` and `uploadsAtGate`). */
export interface SlabPoolStats {
  /** Slabs held by uploads (buffered or in flight to S3). */
  bytesInUse: number
  /** Slabs allocated (in use or kept free for reuse, until trimmed). */
  bytesAllocated: number
  /** The pool's bound (S3_UPLOAD_MEMORY rounded down to slabs). */
  bytesMax: number
  /** Streams waiting for a slab. */
  streamsWaiting: number
  /** Uploads waiting at the gate, their body unread. */
  uploadsAtGate: number
  /** Slabs promised to admitted uploads and not taken yet (counted in no other figure). */
  bytesPromised: number
}

/**
 * A process-wide (per store) pool of slabs, granted one at a time under the banker's rule of
 * the module header. Free slabs are kept for reuse; unused for `idleMs`, they are given back
 * to the system.
 */
export class SlabPool {
  readonly slabSize: number
  /** Bytes per piece, a whole number of slabs. */
  readonly partSize: number
  /** Slabs at most. */
  readonly max: number
  private readonly free: Buffer[] = []
  private allocated = 0
  /** Slabs handed out (held by streams, in pieces filling, waiting or in flight), promised ones included. */
  private out = 0
  /** Of those, slabs promised and not taken yet. */
  private promised = 0
  /** Claims holding a promise, for the stall sweep. */
  private readonly promises = new Set<Claim>()
  /** Uploads waiting for admission, FIFO. */
  private readonly gate: GateWaiter[] = []
  private readonly stallMs: number
  /** Of those, slabs that come back without their stream taking more. */
  private releasing = 0
  /** Streams in the order, by need: how many, and the slabs they hold. */
  private readonly byNeed = new Map<number, { streams: number, held: number }>()
  /** The distinct needs in `byNeed`, ascending. */
  private needs: number[] = []
  /** Waiting streams, by need then arrival. */
  private readonly queue: Waiter[] = []
  private lastUse = Date.now()
  private readonly trim: NodeJS.Timeout

  /**
   * @param partSize bytes per piece (rounded up to whole slabs)
   * @param memory bytes of slabs at most (raised to two pieces' worth)
   * @param idleMs free slabs unused this long are given back to the system
   * @param stallMs a stream waiting on its source this long gives its unused promise back
   */
  constructor (partSize: number, memory: number, { slabSize = SLAB_SIZE, idleMs = 5000, stallMs = PROMISE_STALL_MS } = {}) {
    this.slabSize = slabSize
    this.stallMs = stallMs
    this.partSize = Math.ceil(partSize / slabSize) * slabSize
    // Two pieces at least: one stream may need a whole piece plus the next one's hold-back.
    this.max = Math.max(Math.floor(memory / slabSize), 2 * (this.partSize / slabSize))
    this.trim = setInterval(() => {
      this.sweep()
      if (Date.now() - this.lastUse < idleMs) return
      this.allocated -= this.free.length
      this.free.length = 0
    }, Math.min(idleMs, stallMs / 4))
    this.trim.unref()
  }

  open (): Claim { return new Claim(this) }

  get stats (): SlabPoolStats {
    return {
      bytesInUse: (this.out - this.promised) * this.slabSize,
      bytesAllocated: this.allocated * this.slabSize,
      bytesMax: this.max * this.slabSize,
      streamsWaiting: this.queue.length,
      uploadsAtGate: this.gate.length,
      bytesPromised: this.promised * this.slabSize
    }
  }

  close (): void { clearInterval(this.trim) }

  /**
   * Admission at the gate (module header): resolves with a claim holding a promise of
   * min(⌈maxLength / slab⌉, 16, a piece) slabs once nobody is queued before it, no stream waits
   * for a slab and the state is safe with them set aside. FIFO; rejects with the signal's reason
   * (and leaves the queue) when `signal` aborts first. The claim goes to `streamParts`
   * (`ticket`); `release()` it when the upload ends without using it all.
   */
  admit (maxLength: number | undefined, signal?: AbortSignal): Promise<Claim> {
    const P = this.partSize / this.slabSize
    const bound = maxLength ?? Infinity
    const first = Math.min(Math.ceil(bound / this.slabSize), PROMISE_SLABS, P)
    // Its holding with the promise as its first piece's (empty) slabs; its need overstated
    // (any hold-back is at most a piece), which is safe: streamParts lowers it.
    const rest = Math.ceil((bound - first * this.slabSize) / this.slabSize)
    const holding: Holding = rest <= 0 ? { need: undefined, held: 0, rel: first } : { need: Math.min(2 * P - first, rest), held: first, rel: 0 }
    const claim = new Claim(this)
    if (signal?.aborted === true) return Promise.reject(signal.reason)
    if (this.gate.length === 0 && this.enter(claim, first, holding)) return Promise.resolve(claim)
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const i = this.gate.indexOf(w)
        if (i < 0) return
        this.gate.splice(i, 1)
        reject(signal!.reason)
        this.serve() // the next one may enter now
      }
      const w: GateWaiter = { claim, first, holding, resolve, reject, leave: () => signal?.removeEventListener('abort', onAbort) }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.gate.push(w)
    })
  }

  /** Admits `claim` with `first` promised slabs if no stream waits for a slab and the state stays safe. */
  private enter (claim: Claim, first: number, holding: Holding): boolean {
    if (this.queue.length > 0 || this.out + first > this.max) return false
    this.out += first
    this.account(claim, holding)
    if (!this.safe()) {
      this.out -= first
      this.account(claim, { need: undefined, held: 0, rel: 0 })
      return false
    }
    this.promised += first
    claim.promised = first
    claim.idleSince = Date.now() // until its stream reads: the upload may stall before that
    if (first > 0) this.promises.add(claim)
    return true
  }

  /** @internal */
  takePromised (claim: Claim): Buffer {
    if (claim.promised <= 0) throw new Error('no promised slab left')
    this.lastUse = Date.now()
    claim.promised--
    this.promised--
    if (claim.promised === 0) this.promises.delete(claim)
    if (this.free.length > 0) return this.free.pop()!
    this.allocated++
    return Buffer.allocUnsafeSlow(this.slabSize)
  }

  /** @internal Gives `claim`'s unused promise back; `holding`: its holding without it (else derived). */
  unpromise (claim: Claim, holding?: Holding): void {
    const p = claim.promised
    if (p === 0) return
    claim.promised = 0
    this.promised -= p
    this.out -= p
    this.promises.delete(claim)
    // Not yet streaming: it holds nothing but the promise.
    this.account(claim, holding ?? claim.without?.() ?? { need: undefined, held: 0, rel: 0 })
    this.serve()
  }

  /** Promises of streams waiting on their source for `stallMs` go back. */
  private sweep (): void {
    if (this.promises.size === 0) return
    const now = Date.now()
    for (const claim of [...this.promises]) {
      if (claim.idleSince !== undefined && now - claim.idleSince >= this.stallMs) claim.release()
    }
  }

  /** @internal */
  take (claim: Claim, key: number, after: () => Holding): Buffer | Promise<Buffer> {
    this.lastUse = Date.now()
    if (this.queue.length === 0) {
      const slab = this.grant(claim, after)
      if (slab !== undefined) return slab
    }
    return new Promise((resolve, reject) => {
      let i = this.queue.length
      while (i > 0 && this.queue[i - 1]!.key > key) i--
      this.queue.splice(i, 0, { claim, key, after, resolve, reject })
      this.serve()
    })
  }

  /** @internal */
  cancel (claim: Claim, err: unknown): void {
    const i = this.queue.findIndex(w => w.claim === claim)
    if (i < 0) return
    const [w] = this.queue.splice(i, 1)
    w!.reject(err)
    this.serve()
  }

  /** @internal */
  set (claim: Claim, state: Holding, slabs: Buffer[]): void {
    this.account(claim, state)
    if (slabs.length > 0) {
      this.lastUse = Date.now()
      this.out -= slabs.length
      for (const s of slabs) this.free.push(s)
    }
    this.serve()
  }

  /** Grants `claim` a slab if one is free and the state after is safe. */
  private grant (claim: Claim, after: () => Holding): Buffer | undefined {
    if (this.out >= this.max) return undefined
    const before = claim.state
    this.out++
    this.account(claim, after())
    if (!this.safe()) {
      this.out--
      this.account(claim, before)
      return undefined
    }
    if (this.free.length > 0) return this.free.pop()!
    this.allocated++
    return Buffer.allocUnsafeSlow(this.slabSize)
  }

  /**
   * Serves waiters: smallest need first, FIFO among equals; a larger need only when no smaller can
   * be. Then, while no stream waits for a slab, admits uploads at the gate in order.
   */
  private serve (): void {
    this.serveSlabs()
    while (this.gate.length > 0) {
      const w = this.gate[0]!
      if (!this.enter(w.claim, w.first, w.holding)) return
      this.gate.shift()
      w.leave()
      w.resolve(w.claim)
    }
  }

  private serveSlabs (): void {
    while (this.queue.length > 0 && this.out < this.max) {
      let served = false
      let lastKey = -1
      for (let i = 0; i < this.queue.length; i++) {
        const w = this.queue[i]!
        if (w.key === lastKey) continue // only the first of each need
        lastKey = w.key
        const slab = this.grant(w.claim, w.after)
        if (slab === undefined) continue
        this.queue.splice(i, 1)
        w.resolve(slab)
        served = true
        break
      }
      if (!served) return
    }
  }

  /** Every stream in need order gets its need from the free and releasing slabs plus what the ones before it hold. */
  private safe (): boolean {
    let have = this.max - this.out + this.releasing
    for (const need of this.needs) {
      if (need > have) return false
      have += this.byNeed.get(need)!.held
    }
    return true
  }

  private account (claim: Claim, next: Holding): void {
    const prev = claim.state
    this.releasing += next.rel - prev.rel
    if (prev.need !== undefined) {
      const b = this.byNeed.get(prev.need)!
      b.held -= prev.held
      if (--b.streams === 0) {
        this.byNeed.delete(prev.need)
        this.needs.splice(this.needs.indexOf(prev.need), 1)
      }
    }
    if (next.need !== undefined) {
      const b = this.byNeed.get(next.need)
      if (b !== undefined) {
        b.streams++
        b.held += next.held
      } else {
        this.byNeed.set(next.need, { streams: 1, held: next.held })
        let i = this.needs.length
        while (i > 0 && this.needs[i - 1]! > next.need) i--
        this.needs.splice(i, 0, next.need)
      }
    }
    claim.state = next
  }
}

/** A body over `length` bytes of `slabs`: the slab itself when it is one (the SDK can resend a Buffer), else a stream. */
function bodyOf (slabs: Buffer[], length: number, slabSize: number): Buffer | Readable {
  if (slabs.length === 1) return slabs[0]!.subarray(0, length)
  const last = slabs.length - 1
  return Readable.from(slabs.map((s, i) => i === last ? s.subarray(0, length - last * slabSize) : s))
}

export interface StreamPartsOptions {
  pool: SlabPool
  /** Pieces of one stream uploaded at once. */
  concurrency: number
  /** Bytes the last piece must hold unless it is the only one (0: any size). */
  holdBack: number
  /** Bytes the stream may hold at most; more rejects with `tooLarge()`. */
  maxBytes?: number
  tooLarge?: () => Error
  /** An upper bound of the stream's length, if known (caps what it may need from the pool). */
  maxLength?: number | undefined
  /** The claim `pool.admit` gave this upload (its first slabs come from its promise); absent: a new claim. */
  ticket?: Claim | undefined
  /**
   * Uploads piece `index` (0-based); `body` is only valid until the promise settles. `again`
   * gives a fresh body over the same bytes, for a retry (the SDK cannot resend a stream).
   */
  sendPart (index: number, body: Buffer | Readable, length: number, again: () => Buffer | Readable): Promise<void>
  /** Stores a stream that fits in one piece, instead of sendPart(0); absent: sendPart(0). */
  sendWhole?: (body: Buffer | Readable, length: number, again: () => Buffer | Readable) => Promise<void>
}

/**
 * Cuts `source` into pieces and sends them. Rejects with the source's own error if the source
 * failed, else with the first send's error, after every piece in flight has settled.
 * @returns bytes read and pieces sent
 */
export async function streamParts (source: AsyncIterable<Buffer>, opts: StreamPartsOptions): Promise<{ size: number, pieces: number }> {
  const pieces = new Pieces(opts)
  // A source that fails while this stream waits for a slab ends the wait (its slabs go back now,
  // not once a slab is granted).
  const stop = (err: unknown) => { pieces.claim.cancel(err) }
  if (source instanceof Readable) source.once('error', stop)
  try {
    for await (const chunk of source) await pieces.append(chunk)
    return await pieces.end()
  } finally {
    if (source instanceof Readable) source.off('error', stop)
    await pieces.close()
  }
}

/**
 * One stream's pieces: the piece filling (`cur`, `fill` bytes), a full piece held back until the
 * next reaches `threshold` (`pending`), the pieces on their way to S3, and the stream's holding
 * of the pool's slabs (see the module header), which every change reports to its claim.
 */
class Pieces {
  readonly claim: Claim
  private readonly pool: SlabPool
  /** Slabs per piece, and bytes per slab. */
  private readonly P: number
  private readonly S: number
  /** A full piece waits for at least one more byte: a stream that fits exactly in one piece is then still stored whole. */
  private readonly threshold: number
  /** Slabs the threshold takes. */
  private readonly H: number
  /** Bytes the stream holds at most, as far as known. */
  private bound: number
  private readonly inFlight = new Set<Promise<void>>()
  private sendError: unknown
  private pieces = 0
  private size = 0
  /** Slabs of pieces handed to S3 and not back yet, or about to be (waiting for `concurrency`). */
  private flying = 0
  /** A full piece waiting for the next one to reach `threshold`. */
  private pending: Buffer[] | undefined
  /** The piece filling, and its bytes. */
  private cur: Buffer[] = []
  private fill = 0

  constructor (private readonly opts: StreamPartsOptions) {
    const { pool, holdBack } = opts
    this.pool = pool
    this.S = pool.slabSize
    this.P = pool.partSize / this.S
    this.threshold = Math.max(holdBack, 1)
    this.H = Math.ceil(this.threshold / this.S)
    this.bound = Math.min(opts.maxLength ?? Infinity, opts.maxBytes ?? Infinity)
    this.claim = opts.ticket ?? pool.open()
    this.claim.without = () => this.holding(this.cur.length)
    if (this.claim.hasPromise) this.claim.set(this.holding(this.cur.length)) // its real need (admission overstated it)
  }

  /** Slabs to take before this stream can send something, if its current piece had `c` slabs (0: it can). */
  private needOf (c: number): number {
    const { S, H, P, pending, threshold } = this
    const left = this.bound - this.size
    const space = c * S - this.fill
    if (left <= space) return 0 // all it will read fits in what it holds
    const goes = pending !== undefined && c * S >= threshold
    return Math.min(pending !== undefined && !goes ? H - c : P - c + H, Math.ceil((left - space) / S))
  }

  /** This stream's holding if its current piece had `c` slabs (see the module header). */
  private holding (cReal: number): Holding {
    // Promised slabs count as empty slabs of the current piece (always the first: see the header).
    const c = cReal + this.claim.promised
    const p = this.pending?.length ?? 0
    if (this.bound - this.size <= c * this.S - this.fill) return { need: undefined, held: 0, rel: this.flying + p + c }
    const goes = this.pending !== undefined && c * this.S >= this.threshold
    const held = c + (goes ? 0 : p)
    return { need: held === 0 ? undefined : this.needOf(c), held, rel: this.flying + (goes ? p : 0) }
  }

  /** A promised slab changes no holding (it was counted as held): taken without a check. */
  private takeSlab (): Buffer | Promise<Buffer> {
    const { claim } = this
    return claim.hasPromise ? claim.takePromised() : claim.take(this.needOf(this.cur.length), () => this.holding(this.cur.length + 1))
  }

  /** Copies a chunk of the source into slabs, sending each piece once the next one reaches the threshold. */
  async append (chunk: Buffer): Promise<void> {
    const { S, opts, claim } = this
    claim.idleSince = undefined
    let offset = 0
    while (offset < chunk.length) {
      if (this.sendError !== undefined) throw this.sendError
      if (this.fill === this.cur.length * S) this.cur.push(await this.takeSlab())
      const at = this.fill - (this.cur.length - 1) * S
      const n = Math.min(chunk.length - offset, S - at)
      chunk.copy(this.cur[this.cur.length - 1]!, at, offset, offset + n)
      this.fill += n
      offset += n
      this.size += n
      if (opts.maxBytes !== undefined && this.size > opts.maxBytes) throw opts.tooLarge!()
      if (this.size > this.bound) { this.bound = Infinity; claim.set(this.holding(this.cur.length)) } // not a bound after all
      if (this.pending !== undefined && this.fill >= this.threshold) {
        const full = this.pending
        this.pending = undefined
        await this.send(full, this.pool.partSize, false)
      }
      if (this.fill === this.pool.partSize) {
        this.pending = this.cur
        this.cur = []
        this.fill = 0
      }
    }
    claim.idleSince = Date.now() // waiting on its source: after PROMISE_STALL_MS its promise goes back
  }

  /** The end of the source: what is left is the last piece (joined to the pending one when too short). */
  async end (): Promise<{ size: number, pieces: number }> {
    const { claim, opts } = this
    claim.idleSince = undefined
    this.bound = this.size
    claim.release() // what it did not take goes back at once
    const whole = this.pieces === 0 && opts.sendWhole !== undefined
    const last = this.cur
    const tail = this.fill
    this.cur = []
    this.fill = 0
    const full = this.pending
    this.pending = undefined
    if (full !== undefined && tail > 0) {
      // tail < threshold here (else the pending piece went out already): one piece of both.
      await this.send([...full, ...last], this.pool.partSize + tail, false)
    } else if (full !== undefined) {
      await this.send(full, this.pool.partSize, whole)
    } else if (whole) {
      await this.send(last, tail, true)
    } else if (tail > 0) {
      await this.send(last, tail, false)
    }
    if (whole) this.pieces = 1
    await Promise.all(this.inFlight)
    if (this.sendError !== undefined) throw this.sendError
    return { size: this.size, pieces: this.pieces }
  }

  /** Hands a piece to S3 once fewer than `concurrency` are on their way; its slabs come back when it settles. */
  private async send (slabs: Buffer[], length: number, whole: boolean): Promise<void> {
    const { claim, opts, inFlight } = this
    // Counted as on its way while it waits for a place: nothing else delays it.
    this.flying += slabs.length
    claim.set(this.holding(this.cur.length))
    while (inFlight.size >= opts.concurrency) await Promise.race(inFlight)
    if (this.sendError !== undefined) {
      this.flying -= slabs.length
      claim.give(slabs, this.holding(this.cur.length))
      throw this.sendError
    }
    const again = () => bodyOf(slabs, length, this.S)
    const index = this.pieces++
    const p = (whole ? opts.sendWhole!(again(), length, again) : opts.sendPart(index, again(), length, again))
      .catch(err => { this.sendError ??= err })
      .finally(() => {
        inFlight.delete(p)
        this.flying -= slabs.length
        claim.give(slabs, this.holding(this.cur.length))
      })
    inFlight.add(p)
  }

  /** After the end or a failure: the promise goes back before the pieces in flight settle, then whatever the stream still holds. */
  async close (): Promise<void> {
    const { claim } = this
    claim.idleSince = undefined
    claim.release()
    await Promise.allSettled(this.inFlight)
    const mine = [...(this.pending ?? []), ...this.cur]
    this.pending = undefined
    this.cur = []
    claim.without = undefined
    claim.give(mine, { need: undefined, held: 0, rel: 0 })
  }
}
