/**
 * Random identifiers. Download codes are short (6 symbols of 62) because people type them;
 * everything else (object keys, upload ids, claim ids) is 128 bits so it cannot be guessed.
 */
import { randomBytes, randomFillSync } from 'node:crypto'

export const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
export const CODE_LENGTH = 6
const CODE_PATTERN = /^[A-Za-z0-9]{6}$/
const BLOB_KEY_PATTERN = /^[a-f0-9]{32}$/

// Bytes ≥ 248 (= 4 × 62) are thrown away so that `byte % 62` is uniform: no modulo bias.
const UNBIASED_LIMIT = 256 - (256 % CODE_ALPHABET.length)

/** A fresh download code from the CSPRNG: 6 symbols, 62^6 ≈ 5.7e10 possibilities. */
export function newCode (): string {
  let code = ''
  while (code.length < CODE_LENGTH) {
    for (const byte of randomBytes(CODE_LENGTH * 2)) {
      if (byte < UNBIASED_LIMIT) code += CODE_ALPHABET[byte % CODE_ALPHABET.length]
      if (code.length === CODE_LENGTH) break
    }
  }
  return code
}

/** Exact format check; run before a code reaches any store. */
export const isCode = (value: unknown): value is string => typeof value === 'string' && CODE_PATTERN.test(value)

/** Object key for a stored file: 128 random bits, hex. Never derived from the filename or code. */
export const newBlobKey = (): string => randomBytes(16).toString('hex')

export const isBlobKey = (value: string): boolean => BLOB_KEY_PATTERN.test(value)

/**
 * CSPRNG bytes for claim ids, drawn 4 KiB at a time: every GET /download draws a claim id
 * before its code is looked up (the claim is one atomic step with the lookup), so a 404 paid a
 * synchronous `randomBytes(16)` each: 6–9 % of a profile of 404 lookups (issue 21). Each byte is
 * handed out once, then the pool is refilled; the same technique as Node's `randomUUID` cache.
 */
const CLAIM_POOL_BYTES = 4096
const CLAIM_ID_BYTES = 16
const claimPool = Buffer.alloc(CLAIM_POOL_BYTES)
let claimPoolAt = CLAIM_POOL_BYTES

/** A fresh download claim id: 128 random bits, base64url (22 characters). */
export function newClaimId (): string {
  if (claimPoolAt + CLAIM_ID_BYTES > CLAIM_POOL_BYTES) {
    randomFillSync(claimPool)
    claimPoolAt = 0
  }
  const id = claimPool.toString('base64url', claimPoolAt, claimPoolAt + CLAIM_ID_BYTES)
  claimPoolAt += CLAIM_ID_BYTES
  return id
}
