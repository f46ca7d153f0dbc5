/**
 * Closing a listener that clients are still connecting to. The kernel completes a connection
 * (and the client writes its request) before the process accepts it; closing the listening
 * socket resets every connection still waiting to be accepted. A balancer cannot tell that reset
 * from a crash under the request: nginx sends a GET to another instance but answers an upload
 * 502, since it cannot resend a body it streamed (test/e2e/balancers/rolling-restart.test.ts).
 *
 * libuv accepts one waiting connection per poll (the listener stays readable while more wait),
 * so the listener closes in a check phase (`setImmediate`) after a poll that accepted none: the
 * queue was empty then, and only a connection completed between that poll and the close is
 * lost. That gap is the time the loop spent after polling, normally well under a millisecond,
 * but a busy or descheduled process (a CI machine with two cores, a GC pause) can spend hundreds
 * of ms there while connections pile up. So the iteration must also be quick: it reached its
 * check phase at most QUICK_ITERATION_MS after the previous one, so its poll was that recent.
 * Found: behind nginx, two uploads 300 ms apart were answered 502 as one instance closed its
 * listener, in CI. The previous rule closed right after the first accept, or from a 50 ms timer
 * when none came: it reset whatever else was waiting, and timers run before the poll, so after
 * a stall it closed without accepting at all.
 */
import type { Server } from 'node:net'
import { performance } from 'node:perf_hooks'

/** ms since the previous check phase under which the poll just done is recent enough to close after. */
export const QUICK_ITERATION_MS = 5
/** ms after which the listener closes anyway, quick iteration or not (a loop that never idles). */
export const CLOSE_WITHIN_MS = 2000

/** Closes `server`'s listener right after a quick poll that found nothing waiting, within CLOSE_WITHIN_MS; resolves once closed. */
export function closeAfterPoll (server: Server, opts: { withinMs?: number } = {}): Promise<void> {
  const deadline = performance.now() + (opts.withinMs ?? CLOSE_WITHIN_MS)
  return new Promise(resolve => {
    // Measured from one check phase to the next, so that exactly one poll lies between: the
    // caller may itself run after a stall that followed this iteration's poll.
    let previous: number | undefined
    let accepted = false
    const onConnection = () => { accepted = true }
    server.on('connection', onConnection)
    const attempt = () => {
      const now = performance.now()
      if ((previous !== undefined && now - previous <= QUICK_ITERATION_MS && !accepted) || now >= deadline) {
        server.off('connection', onConnection)
        server.close()
        resolve()
        return
      }
      previous = now
      accepted = false
      setImmediate(attempt)
    }
    setImmediate(attempt)
  })
}
