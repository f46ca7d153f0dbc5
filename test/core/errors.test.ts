import fs from 'node:fs'
import t from 'tap'
import { DropcodeError, ERROR_CATALOGUE } from '../../src/core/errors.js'

const errorsPage = fs.readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
const configurationPage = fs.readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8')

t.test('every error code is unique, prefixed, and documented in docs/errors.md with its status', async t => {
  const codes = Object.keys(ERROR_CATALOGUE)
  t.equal(new Set(codes).size, codes.length)
  for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
    t.match(code, /^DROPCODE_[A-Z_]+$/)
    t.match(errorsPage, new RegExp(`\\| \`${code}\` \\| ${status} \\|`), `${code} (${status}) is in the error table`)
  }
})

t.test('errors carry their catalogue status and message', async t => {
  const e = new DropcodeError('DROPCODE_FILE_TOO_LARGE')
  t.equal(e.statusCode, 413)
  t.equal(e.message, ERROR_CATALOGUE.DROPCODE_FILE_TOO_LARGE.message)
  t.equal(new DropcodeError('DROPCODE_INVALID_FIELD', 'custom').message, 'custom')
})

t.test('every configuration variable is documented in docs/configuration.md', async t => {
  const { EnvSchema } = await import('../../src/config.js')
  for (const name of Object.keys(EnvSchema.properties)) t.match(configurationPage, `\`${name}\``, name)
})
