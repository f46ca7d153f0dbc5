/**
 * The request headers and the error shape of the IETF draft "Resumable Uploads for HTTP"
 * (draft-ietf-httpbis-resumable-upload), in the interop versions dropcode speaks on /files/
 * beside tus (routes/ietf-draft.ts). A request chooses the draft by `Upload-Draft-Interop-Version`:
 * - 5: draft -03 (tus-js-client's `ietf-draft-03`): Upload-Complete, Upload-Offset; any content type;
 * - 6: drafts -04 and -05 (tus-js-client's `ietf-draft-05`): PATCH bodies are
 *   `application/partial-upload`; Upload-Length, Upload-Limit (`max-size`, `expires`); problem
 *   types for a mismatching offset and a completed upload;
 * - 8: drafts -09 to -11 and the editors' copy after -11 (July 2026), the newest text found:
 *   Upload-Limit's `expires` is `max-age`, and a problem type for inconsistent lengths.
 * Headers are Structured Fields (RFC 9651): a value we cannot parse is ignored, as the draft says.
 */
import type { FastifyRequest } from 'fastify'
import type { DropcodeError } from '../core/errors.js'

export const INTEROP_VERSIONS = [5, 6, 8] as const
export type InteropVersion = typeof INTEROP_VERSIONS[number]

const PROBLEMS = 'https://iana.org/assignments/http-problem-types#'
/** The draft's problem types, and the first interop version that defines each. */
export const PROBLEM_TYPES = {
  mismatchingOffset: { type: `${PROBLEMS}mismatching-upload-offset`, title: 'offset from request does not match offset of resource', since: 6 },
  completedUpload: { type: `${PROBLEMS}completed-upload`, title: 'upload is already completed', since: 6, until: 6 },
  inconsistentLength: { type: `${PROBLEMS}inconsistent-upload-length`, title: 'inconsistent length values for upload', since: 8 }
} as const
export type ProblemName = keyof typeof PROBLEM_TYPES

const header = (req: FastifyRequest, name: string): string | undefined => {
  const value = req.headers[name]
  return Array.isArray(value) ? value.join(',') : value
}

/** The interop version a request asks for: a supported number, `'unsupported'`, or undefined (none sent). */
export function interopVersion (req: FastifyRequest): InteropVersion | 'unsupported' | undefined {
  const value = header(req, 'upload-draft-interop-version')
  if (value === undefined) return undefined
  const n = Number(value.trim())
  return (INTEROP_VERSIONS as readonly number[]).includes(n) ? n as InteropVersion : 'unsupported'
}

/** Upload-Complete: a Structured Field Boolean (`?1`, `?0`); anything else is ignored (undefined). */
export function uploadComplete (req: FastifyRequest): boolean | undefined {
  const value = header(req, 'upload-complete')?.trim()
  return value === '?1' ? true : value === '?0' ? false : undefined
}

/** Whether the request has content (a positive Content-Length, or a chunked body). */
export const hasContent = (req: FastifyRequest) =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0

/** Whether the request's body is labelled `application/partial-upload` (an append from interop version 6 on). */
export const isPartialUpload = (req: FastifyRequest) =>
  (header(req, 'content-type') ?? '').split(';', 1)[0]!.trim().toLowerCase() === 'application/partial-upload'

/** Upload-Limit (a Structured Field Dictionary): `max-size`, and the upload's remaining life under the version's name. */
export function uploadLimit (version: InteropVersion, limits: { maxSize: number, lifeSeconds?: number | undefined }): string | undefined {
  if (version < 6) return undefined
  const life = limits.lifeSeconds !== undefined ? `, ${version === 6 ? 'expires' : 'max-age'}=${Math.max(0, Math.floor(limits.lifeSeconds))}` : ''
  return `max-size=${limits.maxSize}${life}`
}

/**
 * The RFC 9457 members of an error answered to a draft request: the draft's problem type where
 * it defines one for this error in this version (the route names it in `details.problem`, or the
 * error's code implies it), else `about:blank` with the catalogue message as `detail`.
 */
export function problemMembers (version: InteropVersion, err: DropcodeError): Record<string, unknown> {
  const named = err.details?.problem as ProblemName | undefined
  const name: ProblemName | undefined = named ?? (err.code === 'DROPCODE_OFFSET_MISMATCH' ? 'mismatchingOffset' : undefined)
  const problem = name !== undefined ? PROBLEM_TYPES[name] : undefined
  const defined = problem !== undefined && version >= problem.since && version <= ('until' in problem ? problem.until : Infinity)
  const { problem: _name, provided: _provided, ...details } = err.details ?? {}
  const members: Record<string, unknown> = defined ? { type: problem.type, title: problem.title } : { type: 'about:blank' }
  if (name === 'mismatchingOffset' && defined) {
    members['expected-offset'] = details.offset
    if (typeof _provided === 'number') members['provided-offset'] = _provided
  }
  // `error` and `code` as in every dropcode error body (extension members, RFC 9457 §3.2).
  return { ...members, status: err.statusCode, detail: err.message, error: err.message, code: err.code, ...details }
}

/**
 * The filename of a `Content-Disposition` request header (the draft's way to name the upload):
 * `filename*=UTF-8''…` (RFC 8187) before `filename=`, quoted or a token; undefined if none or
 * undecodable.
 */
export function dispositionFilename (req: FastifyRequest): string | undefined {
  const value = header(req, 'content-disposition')
  if (value === undefined) return undefined
  const extended = /;\s*filename\*\s*=\s*UTF-8'[^']*'([^;\s]+)/i.exec(value)
  if (extended !== null) {
    try { return decodeURIComponent(extended[1]!) } catch { /* fall back to filename= */ }
  }
  const plain = /;\s*filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(value)
  if (plain === null) return undefined
  return plain[1] !== undefined ? plain[1].replace(/\\(.)/g, '$1') : plain[2]
}
