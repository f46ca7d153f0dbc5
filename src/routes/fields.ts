/** Parsing of the integer form fields shared by the upload endpoints. */
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
