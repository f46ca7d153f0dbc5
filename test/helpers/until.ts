/** Polling for a condition that another process or a timer brings about. */

/** Resolves once `check` is true (polling every `every` ms), or rejects after `ms`. */
export async function until (check: () => boolean, ms = 10_000, what = 'condition', every = 10): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, every))
  }
}
