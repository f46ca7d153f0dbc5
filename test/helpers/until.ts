/**
 * Polling for a condition that another process, a socket or a timer brings about, always with a
 * deadline: a bug shows as this test's message, not as tap's timeout of the whole file.
 */

/** Resolves once `check` is true (polling every `every` ms), or rejects after `ms`. */
export async function until (check: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition', every = 10): Promise<void> {
  const deadline = Date.now() + ms
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, every))
  }
}
