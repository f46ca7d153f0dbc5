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

/**
 * Like `until`, for checks that fail by throwing (a server not up yet, a command refused):
 * resolves once `check` neither throws nor answers false; the last error is in the timeout's
 * message.
 */
export async function untilOk (check: () => Promise<unknown>, ms = 15_000, what = 'condition', every = 50): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    let last: unknown
    try {
      if (await check() !== false) return
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last !== undefined ? `: ${String(last)}` : ''}`)
    await new Promise(resolve => setTimeout(resolve, every))
  }
}
