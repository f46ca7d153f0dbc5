/** Parsing of the form fields of the upload endpoints: 400s before any store sees a value. */
import { DropcodeError } from '../errors.js'

/**
 * A positive decimal integer from 1 to `max` (no sign, no leading zeros, no decimals, no
 * spaces); `fallback` when the field is absent. Anything else is DROPCODE_INVALID_FIELD.
 */
export function positiveInt (name: string, raw: string | undefined, max: number, fallback: number): number {
  if (raw === undefined) return fallback
  const n = /^[1-9][0-9]{0,15}$/.test(raw) ? Number(raw) : NaN
  if (!(n >= 1 && n <= max)) {
    throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "${name}" must be an integer from 1 to ${max}.`)
  }
  return n
}

/** A field that must be present. */
export function required (name: string, value: string | undefined): string {
  if (value === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', `Field "${name}" is required.`)
  return value
}

/** upload_id: 22 base64url characters (128 bits). */
export function uploadId (raw: string | undefined): string {
  const value = required('upload_id', raw)
  if (!/^[A-Za-z0-9_-]{22}$/.test(value)) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Field "upload_id" is not a valid upload id.')
  return value
}

/** chunk_index: a non-negative decimal integer (no sign, no leading zeros). */
export function chunkIndex (raw: string | undefined): number {
  const value = required('chunk_index', raw)
  if (!/^(0|[1-9][0-9]{0,4})$/.test(value)) throw new DropcodeError('DROPCODE_INVALID_FIELD', 'Field "chunk_index" must be a non-negative integer.')
  return Number(value)
}
