/**
 * Work that must finish before the stores close: an upload whose connection a shutdown cut
 * still has to delete what it stored. Services wrap such work in `track`; the services plugin
 * waits for `drain` when the app closes (its onClose runs before the stores' onClose).
 */
export class InFlight {
  private readonly pending = new Set<Promise<unknown>>()

  track<T> (work: Promise<T>): Promise<T> {
    this.pending.add(work)
    const forget = () => { this.pending.delete(work) }
    work.then(forget, forget)
    return work
  }

  /** Resolves when everything tracked has settled, or after `timeoutMs`. */
  async drain (timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.allSettled([...this.pending]),
      new Promise(resolve => { timer = setTimeout(resolve, timeoutMs) })
    ])
    clearTimeout(timer)
  }
}
