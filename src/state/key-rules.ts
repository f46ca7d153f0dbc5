/**
 * The rules of KeyStore that need no atomicity of their own, shared by both drivers so they
 * cannot drift apart: whether a secret opens a key, and what a rotation makes of a record. Each
 * driver applies them inside its own atomic step (an LMDB write; on Redis a script that writes
 * only if the record is still the one the rule was computed from).
 */
import type { ApiKeyRecord } from '../core/model.js'

/** Whether the secret with hex SHA-256 `hash` opens `key` at `now` (epoch ms). */
export function opens (key: ApiKeyRecord, hash: string, now: number): boolean {
  const until = key.secrets[hash]
  if (until === undefined || (until !== 0 && until <= now)) return false
  return key.expiresAt === undefined || key.expiresAt > now
}

/**
 * `key` with secret `hash` added (no end), every other secret ending at `oldUntil` or its own
 * earlier end (epoch ms), and the secrets ended by `now` left out.
 * @returns the new record, and the hashes it no longer lists (their mappings go)
 */
export function rotated (key: ApiKeyRecord, hash: string, oldUntil: number, now: number): { key: ApiKeyRecord, forgotten: string[] } {
  const secrets: Record<string, number> = {}
  const forgotten: string[] = []
  for (const [h, until] of Object.entries(key.secrets)) {
    const ends = until === 0 ? oldUntil : Math.min(until, oldUntil)
    if (ends <= now) forgotten.push(h)
    else secrets[h] = ends
  }
  secrets[hash] = 0
  return { key: { ...key, secrets }, forgotten }
}
