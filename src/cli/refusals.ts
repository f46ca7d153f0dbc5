/**
 * Refusals by a limit, in words a CI log can act on. The service's ErrorAnswer names the limit
 * that refused a request, its value and whose it is (`limit`, `limit_value`, `limit_of`: an API
 * key's name or "service"); its `error` text is the same for every key and value. A job that
 * fails with "this API key (ci-main) holds as many bytes as its quota of 50 GiB allows" says
 * which key to look at and by how much, without a look at the server's configuration.
 */
import type { KeyLimitsAnswer } from '../api/answers.js'
import { humanBytes } from './units.js'

const BYTE_LIMITS: ReadonlySet<string> = new Set<keyof KeyLimitsAnswer>(['max_file_size', 'quota_bytes'])

/**
 * The message for a service's refusal whose body names a limit; undefined when it names none
 * (the generic "STATUS CODE: error" is then used). The status and code stay at the end, for
 * searching logs and docs.
 */
export function limitRefusal (status: number, body: Record<string, unknown>): string | undefined {
  const { code, limit, limit_value: value, limit_of: of } = body
  if (typeof code !== 'string' || typeof limit !== 'string' || typeof value !== 'number') return undefined
  const key = typeof of === 'string' && of !== 'service' ? of : undefined
  // Without limit_of the owner is not known: quotas, sessions and rates are counted per key.
  const holder = key !== undefined ? `this API key (${key})` : of === 'service' ? 'the service' : 'this API key'
  const whose = key !== undefined ? `this API key's (${key})` : of === 'service' ? 'the service\'s' : 'the'
  const amount = BYTE_LIMITS.has(limit) ? humanBytes(value) : String(value)
  const tail = ` (${status} ${code})`
  switch (code) {
    case 'DROPCODE_QUOTA_EXCEEDED':
      return `refused: ${holder} holds as many bytes as its quota of ${amount} allows; delete files or let them expire first${tail}`
    case 'DROPCODE_TOO_MANY_SESSIONS':
      // An interrupted upload's session counts until it expires; rerunning that upload resumes it.
      return `refused: ${holder} has as many open upload sessions as its limit of ${amount} allows; complete them (rerun an interrupted upload to resume it) or let them expire first${tail}`
    case 'DROPCODE_FILE_TOO_LARGE':
      return `refused: the file is larger than ${whose} limit of ${amount} per file${tail}`
    case 'DROPCODE_RATE_LIMITED':
      return `rate limited: ${holder} may start ${amount} uploads per minute${tail}`
  }
  const error = typeof body.error === 'string' ? `: ${body.error}` : ''
  return `${status} ${code}${error} (${whose} ${limit} is ${amount})`
}
