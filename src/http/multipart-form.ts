/**
 * Reads a multipart/form-data request in wire order, streaming its one file part into a
 * handler and collecting the known text fields, wherever they stand relative to the file.
 *
 * Why a reader of our own around `req.parts()`: clients send fields before or after the file
 * (curl keeps command-line order), so fields after the file are only known once the file is
 * stored; any error after that point must discard what was stored. Busboy's own errors
 * (truncated body, bad boundary, count limits) are mapped to the error catalogue here.
 */
import type { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Static, TObject } from 'typebox'
import { DropcodeError, isDropcodeError } from '../core/errors.js'
import { parseFields } from './form-fields.js'

/**
 * Streams the file part into storage: consumes the whole stream (or fails); called at most once
 * per request, with the raw values of the schema's fields that came before the file. What it
 * stores stays pending (services/pending.ts) and is aborted when the request fails afterwards.
 */
export type StoreFile<T extends Abortable> = (stream: Readable, filename: string | undefined, fieldsBefore: Partial<Record<string, string>>) => Promise<T>

/** Something stored that can be undone. */
export interface Abortable { abort (): Promise<void> }

export interface FormResult<S extends TObject, T extends Abortable> {
  /** The fields, checked against the schema (parse-fields.ts). */
  fields: Static<S>
  file: T | undefined
}

const LIMIT_CODES = new Set(['FST_PARTS_LIMIT', 'FST_FILES_LIMIT', 'FST_FIELDS_LIMIT'])

/**
 * Bytes in a part's name (its Content-Disposition `name`). Ours are short; a longer one is a 400.
 * Enforced here: busboy applies its `fieldNameSize` limit to urlencoded bodies only, and in a
 * multipart body keeps up to 80 KiB of a part's headers and drops the rest, so a 1 MB name
 * arrived cut and untold (its `fieldnameTruncated` is always false) and was accepted.
 */
export const FIELD_NAME_BYTES = 100

/** The request's declared Content-Length: an upper bound of a file part's length (undefined when absent). */
export function declaredLength (req: FastifyRequest): number | undefined {
  const n = Number(req.headers['content-length'])
  return Number.isSafeInteger(n) && n >= 0 && req.headers['transfer-encoding'] === undefined ? n : undefined
}

/**
 * Waits at the storage's gate (`admit`: FileService.admit, S3: parts.ts) before anything reads the body,
 * so a waiting upload holds one socket read and TCP slows its client. Leaves the queue when the
 * client goes (the request or its response closes): rejects then. Resolves with the ticket to
 * pass to the store (undefined when the store has no gate); `release()` it once the body is read.
 * Node sees a client go only while it reads its socket: one that sent a full read before going
 * is noticed when the stall guard cuts the connection or when it is admitted (its body fails).
 * A waiting request's unread bytes are buffered, which the stall guard counts as the server being
 * behind, not the client.
 */
export async function admitBody<T> (req: FastifyRequest, reply: FastifyReply, admit: ((maxLength: number | undefined, signal: AbortSignal) => Promise<T>) | undefined): Promise<T | undefined> {
  if (admit === undefined) return undefined
  const gone = new AbortController()
  const leave = () => gone.abort(new DropcodeError('DROPCODE_MALFORMED_MULTIPART', 'The client closed the request while it waited for upload memory.'))
  if (req.raw.destroyed || reply.raw.destroyed) leave()
  req.raw.once('close', leave)
  reply.raw.once('close', leave)
  try {
    return await admit(declaredLength(req), gone.signal)
  } finally {
    req.raw.off('close', leave)
    reply.raw.off('close', leave)
  }
}

/** Maps an error thrown by the multipart parser to the catalogue. */
function parserError (err: unknown): DropcodeError {
  if (isDropcodeError(err)) return err
  const code = (err as { code?: string })?.code ?? ''
  if (LIMIT_CODES.has(code)) return new DropcodeError('DROPCODE_TOO_MANY_PARTS', undefined, undefined, { cause: err })
  if (code === 'FST_REQ_FILE_TOO_LARGE') return new DropcodeError('DROPCODE_FILE_TOO_LARGE', undefined, undefined, { cause: err })
  if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') return new DropcodeError('DROPCODE_NOT_MULTIPART', undefined, undefined, { cause: err })
  if (code === 'FST_PROTO_VIOLATION') {
    return new DropcodeError('DROPCODE_INVALID_FIELD', 'Part names such as "__proto__" or "constructor" are refused.', undefined, { cause: err })
  }
  return new DropcodeError('DROPCODE_MALFORMED_MULTIPART', undefined, undefined, { cause: err })
}

/** A form with text fields only (a file part is refused). */
export const readFields = <S extends TObject>(req: FastifyRequest, schema: S) =>
  readForm<S, never>(req, '', schema, () => { throw new Error('unreachable: no file part is read') }).then(f => f.fields)

/**
 * @param fileField name of the single file part expected (e.g. `file`); '' when none is
 * @param schema the text fields: others are ignored, duplicates are a 400, and the collected
 *   values are checked against it once the whole body is read (the stored file is aborted if
 *   they fail)
 * @param store streams the file part into storage
 */
export async function readForm<S extends TObject, T extends Abortable> (
  req: FastifyRequest,
  fileField: string,
  schema: S,
  store: StoreFile<T>
): Promise<FormResult<S, T>> {
  const fields: Partial<Record<string, string>> = Object.create(null)
  const wanted = new Set<string>(Object.keys(schema.properties))
  let file: T | undefined
  let fileSeen = false
  const parts = req.parts()[Symbol.asyncIterator]()
  try {
    while (true) {
      let next: IteratorResult<Awaited<ReturnType<typeof parts.next>>['value']>
      try {
        next = await parts.next()
      } catch (err) {
        throw parserError(err)
      }
      if (next.done === true) break
      const part = next.value
      if (Buffer.byteLength(part.fieldname ?? '') > FIELD_NAME_BYTES || (part.type === 'field' && part.fieldnameTruncated)) {
        throw new DropcodeError('DROPCODE_INVALID_FIELD', `A part's name is longer than ${FIELD_NAME_BYTES} bytes.`)
      }
      if (part.type === 'file') {
        if (fileField === '') throw new DropcodeError('DROPCODE_INVALID_FIELD', 'This endpoint takes no file part.')
        if (part.fieldname !== fileField) {
          throw new DropcodeError('DROPCODE_INVALID_FIELD', `Unexpected file field "${String(part.fieldname ?? '').slice(0, 64)}": send the file as "${fileField}".`)
        }
        if (fileSeen) throw new DropcodeError('DROPCODE_TOO_MANY_FILES')
        fileSeen = true
        // An error of the file stream itself is the request's fault (a body cut inside the
        // file, say), whatever the handler made of it: 400, not 500.
        let streamError: unknown
        part.file.once('error', (err: unknown) => { streamError = err })
        try {
          file = await store(part.file, part.filename, fields)
        } catch (err) {
          // `errored` too: the store may fail on the stream's error before its 'error' event is out.
          const failed = streamError ?? part.file.errored ?? undefined
          if (failed !== undefined && !isDropcodeError(err)) throw parserError(failed)
          throw err
        }
        continue
      }
      if (!wanted.has(part.fieldname)) continue
      if (part.fieldname in fields) {
        throw new DropcodeError('DROPCODE_DUPLICATE_FIELD', `Field "${part.fieldname}" was sent more than once.`)
      }
      if (part.valueTruncated || typeof part.value !== 'string') {
        throw new DropcodeError('DROPCODE_INVALID_FIELD', `Field "${part.fieldname}" is too long.`)
      }
      fields[part.fieldname] = part.value
    }
    return { fields: parseFields(schema, fields), file }
  } catch (err) {
    if (file !== undefined) await file.abort()
    throw err
  }
}
