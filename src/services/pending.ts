/**
 * Bytes stored for a request but not yet kept: an uploaded file (files.ts `receive`) or one chunk
 * of a session (sessions.ts `receiveChunk`). The request's fields may come after its file part
 * (multipart keeps the client's order), so a route stores first and, once the whole form is read,
 * `commit`s (keeps them: the file published under a code, the chunk recorded in its session) or
 * `abort`s (a later part of the request failed: nothing is recorded and the bytes go).
 */
import { DropcodeError } from '../core/errors.js'

export interface Pending<Kept, Settings extends object = object> {
  /** SHA-256 of the bytes as they arrived, hex. */
  readonly sha256: string
  /** Bytes. */
  readonly size: number
  /**
   * Keeps the bytes. `sha256`: the digest the client declared (lowercase hex); when it differs
   * from the bytes' the pending bytes are aborted and DROPCODE_DIGEST_MISMATCH thrown.
   */
  commit (settings: Settings & { sha256?: string | undefined }): Promise<Kept>
  /** Forgets the bytes (safe to call more than once, and after a failed commit). */
  abort (): Promise<void>
}

/**
 * The digest check every commit starts with: throws DROPCODE_DIGEST_MISMATCH, after aborting,
 * when the client declared a SHA-256 other than the bytes'. `what`: the refusal's message.
 */
export async function checkDigest (pending: Pick<Pending<unknown>, 'sha256' | 'abort'>, declared: string | undefined, what?: string): Promise<void> {
  if (declared === undefined || declared === pending.sha256) return
  await pending.abort()
  throw new DropcodeError('DROPCODE_DIGEST_MISMATCH', what, { declared_sha256: declared, sha256: pending.sha256 })
}
