/**
 * The body of an append (`BlobStore.appendChunk`) as both drivers read it. A tus client resumes
 * from the offset the server reports, so the bytes that arrived before the body failed (client
 * gone, stall cut) must be stored, not thrown away as `put` does. Reading the body through this
 * iterable turns its failure into a normal end: the writer (a file stream, the S3 part writer)
 * then flushes every byte it has taken, as it would at the body's real end, and the driver
 * reports the failure as `cut` beside the receipt.
 */
import type { Readable } from 'node:stream'

export class AppendBody implements AsyncIterable<Buffer> {
  /** Bytes yielded so far: what the writer took, and `observe` saw. */
  bytes = 0
  /** The body's error once it failed; undefined while it has not. */
  cut: unknown
  private failed = false

  constructor (private readonly body: Readable, private readonly observe?: ((data: Buffer) => void) | undefined) {
    // The driver may do I/O before it reads the body (S3 fetches the previous tail): an error
    // meanwhile must be noted, not crash the process as an unhandled 'error' event.
    body.on('error', err => { this.fail(err) })
  }

  private fail (err: unknown): void {
    if (this.failed) return
    this.failed = true
    this.cut = err
  }

  /**
   * The body's buffers, in order, each passed to `observe` as it is handed over. Ends normally
   * when the body fails. Stopped early by its reader (the writer failed), it destroys the body.
   */
  async * [Symbol.asyncIterator] (): AsyncGenerator<Buffer> {
    const source = this.body[Symbol.asyncIterator]() as AsyncIterator<Buffer | Uint8Array>
    let ended = false
    try {
      while (true) {
        let next: IteratorResult<Buffer | Uint8Array>
        try {
          next = await source.next()
        } catch (err) {
          // Only the body's own failure is a cut (a body destroyed without an error, a closed
          // socket, fails here with a premature close); an `observe` that throws is not.
          ended = true
          this.fail(err)
          return
        }
        if (next.done === true) { ended = true; return }
        const data = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value)
        if (data.length === 0) continue
        this.bytes += data.length
        this.observe?.(data)
        yield data
      }
    } finally {
      if (!ended) await source.return?.() // the reader stopped: the body's iterator destroys it
    }
  }
}
