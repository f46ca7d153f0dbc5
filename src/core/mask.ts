/**
 * Secrets as a log line may show them. A download code lets whoever reads it download the file,
 * an upload id lets its holder feed and complete a session, a claim id (a download's ETag)
 * resumes a download: none of them is ever written whole. The first two characters stay, enough
 * to tell two requests apart or to narrow a complaint down ("the code starting with Xy") while
 * leaving 4 of a code's 6 characters (62^4 ≈ 15 million choices) and 20 of an id's 22 unknown.
 */
export const MASK_KEEP = 2

/** `value`'s first two characters and `****`; '' stays ''. */
export const maskSecret = (value: string): string => value === '' ? '' : `${value.slice(0, MASK_KEEP)}****`
