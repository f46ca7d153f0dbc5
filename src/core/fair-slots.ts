/**
 * Transfer slots shared fairly between subjects (API keys for uploads, client addresses for
 * downloads).
 *
 * A slot costs little: what a transfer holds in memory is bounded by its buffers (the S3 slab
 * pool, stream high-water marks), not by the slot. Slots only bound the number of requests in
 * flight, so the limit is in the thousands, and the rule that matters is who may take them:
 *
 *   a subject may take a slot while it holds fewer slots than are left free.
 *
 * So one subject alone holds at most half of the slots, whatever it does (stalled uploads, readers
 * that stop reading), and a subject that holds nothing finds a free slot as long as any is left:
 * from the taker's side, `held < limit − used` after every grant, so free ≥ held of the last
 * taker, hence > 0 until many subjects together fill the instance (then it is real load, and
 * the excess is answered 503 with Retry-After). Its share shrinks as others take slots: two
 * subjects filling at once end near ⅓ each, with ⅓ left for everyone else.
 */
export type Refusal = 'full' | 'share'

export interface SlotStats {
  /** Slots in all (0: no limit). */
  limit: number
  used: number
  /** Subjects holding at least one slot. */
  subjects: number
  /** Slots held by the subject holding most. */
  largest: number
}

export class FairSlots {
  private used = 0
  private readonly held = new Map<string, number>()

  /** @param limit slots in all; 0: no limit (nothing is counted). */
  constructor (readonly limit: number) {}

  /**
   * Takes a slot for `subject`, or says why not.
   * @returns a release function (idempotent), or the refusal
   */
  take (subject: string): (() => void) | Refusal {
    if (this.limit === 0) return () => {}
    const mine = this.held.get(subject) ?? 0
    const free = this.limit - this.used
    const refusal: Refusal | undefined = free <= 0 ? 'full' : mine >= free ? 'share' : undefined
    if (refusal !== undefined) return refusal
    this.used++
    this.held.set(subject, mine + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      this.used--
      const left = this.held.get(subject)! - 1
      if (left === 0) this.held.delete(subject)
      else this.held.set(subject, left)
    }
  }

  /** The figures /metrics shows. */
  stats (): SlotStats {
    let largest = 0
    for (const n of this.held.values()) largest = Math.max(largest, n)
    return { limit: this.limit, used: this.used, subjects: this.held.size, largest }
  }
}
