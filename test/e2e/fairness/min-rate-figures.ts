/** The small minimum-rate figures both stall-guard test files run with, and their bounds. */
export const KiB = 1024
export const MiB = 1024 * KiB
export const WINDOW_MS = 2000
export const MIN_BYTES = 256 * KiB
/** The documented bound: a window that still passed, the failing one, a tick after each (500 ms here). */
export const BOUND_MS = 2 * WINDOW_MS + 1000
/** For a loaded machine (2 cores shared with other test runs). */
export const SLACK_MS = 4000
