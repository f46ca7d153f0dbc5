/**
 * Multipart text fields checked against the route's TypeBox schema: the same object that
 * documents the body in /openapi.json validates it and types the handler.
 *
 * Multipart fields arrive as strings. An `integer` property accepts only a plain decimal
 * (no sign, no leading zeros, no spaces, no exponent); anything else fails its type check.
 * A missing required field is DROPCODE_MISSING_FIELD, a bad value DROPCODE_INVALID_FIELD, with
 * a message built from the schema (bounds, description), never echoing the value.
 */
import type { Static, TObject, TSchema } from 'typebox'
import { Value } from 'typebox/value'
import { DropcodeError } from '../core/errors.js'

const DECIMAL = /^(0|[1-9][0-9]{0,15})$/

type Prop = TSchema & { type?: string, minimum?: number, maximum?: number, description?: string, default?: unknown }

function invalid (name: string, prop: Prop): DropcodeError {
  const why = prop.type === 'integer'
    ? `must be an integer from ${prop.minimum ?? 0} to ${prop.maximum ?? Number.MAX_SAFE_INTEGER}`
    : `is not valid${prop.description !== undefined ? ` (${prop.description.replace(/\.$/, '')})` : ''}`
  return new DropcodeError('DROPCODE_INVALID_FIELD', `Field "${name}" ${why}.`)
}

/** The fields of `raw` named in `schema`, converted, checked and defaulted. */
export function parseFields<T extends TObject> (schema: T, raw: Partial<Record<string, string>>): Static<T> {
  const out: Record<string, unknown> = {}
  for (const name of schema.required ?? []) {
    if (raw[name] === undefined) throw new DropcodeError('DROPCODE_MISSING_FIELD', `Field "${name}" is required.`)
  }
  for (const [name, p] of Object.entries(schema.properties)) {
    const prop = p as Prop
    const given = raw[name]
    if (given === undefined) {
      if (prop.default !== undefined) out[name] = prop.default
      continue
    }
    const value = prop.type === 'integer' && DECIMAL.test(given) ? Number(given) : given
    if (!Value.Check(prop, value)) throw invalid(name, prop)
    out[name] = value
  }
  return out as Static<T>
}
