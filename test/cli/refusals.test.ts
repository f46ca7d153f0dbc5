/**
 * How the CLI words the service's refusals (src/cli/http.ts answerError, src/cli/refusals.ts):
 * a refusal by a limit names the limit, its value (bytes in binary units) and whose it is, so a
 * CI log says which key to look at; the new 403s are final (exit 7, no retry) for upload too.
 */
import t from 'tap'
import { VERSION_HEADER } from '../../src/api/answers.js'
import { CliError, EXIT } from '../../src/cli/exit-codes.js'
import { answerError, Retryable } from '../../src/cli/http.js'
import { humanBytes } from '../../src/cli/units.js'

const GiB = 1024 ** 3
const service = { [VERSION_HEADER]: '0.1.0' }

function final (status: number, body: Record<string, unknown>): CliError {
  const err = answerError(status, service, body)
  if (!(err instanceof CliError)) throw new Error(`${status} ${String(body.code)} is not final: ${err.message}`)
  return err
}

t.test('quota, sessions, file size: the limit, its value and the key, exit 7', async t => {
  const quota = final(403, { code: 'DROPCODE_QUOTA_EXCEEDED', error: 'This API key holds as many bytes as its quota allows; delete files or let them expire first.', limit: 'quota_bytes', limit_value: 50 * GiB, limit_of: 'ci-main' })
  t.equal(quota.exitCode, EXIT.REFUSED)
  t.equal(quota.message, 'refused: this API key (ci-main) holds as many bytes as its quota of 50 GiB allows; delete files or let them expire first (403 DROPCODE_QUOTA_EXCEEDED)')

  const sessions = final(403, { code: 'DROPCODE_TOO_MANY_SESSIONS', error: '…', limit: 'max_open_sessions', limit_value: 4, limit_of: 'ci-main' })
  t.equal(sessions.exitCode, EXIT.REFUSED, '403 now: a limit of the key, not a rate (not retried)')
  t.match(sessions.message, /^refused: this API key \(ci-main\) has as many open upload sessions as its limit of 4 allows; complete them .* \(403 DROPCODE_TOO_MANY_SESSIONS\)$/)

  const large = final(413, { code: 'DROPCODE_FILE_TOO_LARGE', error: 'The file is larger than this service accepts.', limit: 'max_file_size', limit_value: 2 * GiB, limit_of: 'ci-main' })
  t.equal(large.exitCode, EXIT.REFUSED)
  t.equal(large.message, 'refused: the file is larger than this API key\'s (ci-main) limit of 2 GiB per file (413 DROPCODE_FILE_TOO_LARGE)')
  t.equal(final(413, { code: 'DROPCODE_FILE_TOO_LARGE', error: '…', limit: 'max_file_size', limit_value: 1000, limit_of: 'service' }).message,
    'refused: the file is larger than the service\'s limit of 1000 bytes per file (413 DROPCODE_FILE_TOO_LARGE)')
})

t.test('other refusals with a limit keep the service\'s text and add the limit', async t => {
  const invalid = final(400, { code: 'DROPCODE_INVALID_FIELD', error: 'max_downloads is above what this API key allows.', limit: 'max_downloads', limit_value: 5, limit_of: 'ci' })
  t.equal(invalid.message, '400 DROPCODE_INVALID_FIELD: max_downloads is above what this API key allows. (this API key\'s (ci) max_downloads is 5)')
  const above = final(400, { code: 'DROPCODE_INVALID_FIELD', error: 'quota_bytes is above the service\'s own.', limit: 'quota_bytes', limit_value: 1536 * 1024 ** 2, limit_of: 'service' })
  t.match(above.message, /\(the service's quota_bytes is 1\.5 GiB\)$/)
  t.match(final(403, { code: 'DROPCODE_QUOTA_EXCEEDED', error: '…', limit: 'quota_bytes', limit_value: GiB }).message,
    /^refused: this API key holds as many bytes as its quota of 1 GiB allows/, 'no limit_of: no name')
})

t.test('without limit fields: the service\'s own words, as before', async t => {
  const forbidden = final(403, { code: 'DROPCODE_FORBIDDEN', error: 'This API key may not do this: managing keys takes an admin key.' })
  t.equal(forbidden.exitCode, EXIT.REFUSED)
  t.equal(forbidden.message, '403 DROPCODE_FORBIDDEN: This API key may not do this: managing keys takes an admin key.')
  t.equal(final(403, { code: 'DROPCODE_QUOTA_EXCEEDED', error: 'This API key holds as many bytes as its quota allows.' }).message,
    '403 DROPCODE_QUOTA_EXCEEDED: This API key holds as many bytes as its quota allows.')
  t.equal(final(401, { code: 'DROPCODE_UNAUTHORIZED', error: 'Missing or invalid API key.' }).exitCode, EXIT.AUTH)
  t.equal(final(404, { code: 'DROPCODE_KEY_NOT_FOUND', error: '…' }).exitCode, EXIT.NOT_FOUND)
})

t.test('409 KEY_EXISTS is final; the busy-lock 409 and a rate limit are still retried', async t => {
  const exists = final(409, { code: 'DROPCODE_KEY_EXISTS', error: 'An API key of this name exists already.' })
  t.equal(exists.exitCode, EXIT.REFUSED)
  t.type(answerError(409, service, { code: 'DROPCODE_SESSION_BUSY', error: '…' }), Retryable)
  t.type(answerError(409, {}, {}), Retryable, 'a proxy\'s 409 too')
  const rate = answerError(429, service, { code: 'DROPCODE_RATE_LIMITED', error: '…', limit: 'uploads_per_minute', limit_value: 10, limit_of: 'ci' })
  t.type(rate, Retryable)
  t.equal(rate.message, 'rate limited: this API key (ci) may start 10 uploads per minute (429 DROPCODE_RATE_LIMITED)')
})

t.test('limit fields in an answer that is not the service\'s are not believed', async t => {
  const err = answerError(403, {}, { limit: 'quota_bytes', limit_value: 1, limit_of: 'x' }, 'Forbidden')
  t.match(err.message, /^a proxy between you and the service refused the request: 403 Forbidden/)
})

t.test('humanBytes', async t => {
  t.equal(humanBytes(0), '0 bytes')
  t.equal(humanBytes(1), '1 byte')
  t.equal(humanBytes(1023), '1023 bytes')
  t.equal(humanBytes(1024), '1 KiB')
  t.equal(humanBytes(512 * 1024 ** 2), '512 MiB')
  t.equal(humanBytes(5e9), '4.7 GiB')
  t.equal(humanBytes(3 * 1024 ** 4), '3 TiB')
})
