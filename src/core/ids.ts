/**
 * Random identifiers. Download codes are short (6 symbols of 62) because people type them;
 * everything else (object keys, upload ids) is 128 bits so it cannot be guessed.
 */
import { randomBytes } from 'node:crypto'

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
