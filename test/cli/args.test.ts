/**
 * Command-line parsing (src/cli/args.ts) without a process: `dropcode keys …`, and the common
 * options and keys as every command reads them.
 */
import t from 'tap'
import { HELP, parse } from '../../src/cli/args.js'
import { CliError, EXIT } from '../../src/cli/exit-codes.js'

const env = { DROPCODE_URL: 'http://drop.test', DROPCODE_KEY: 'admin-secret' }
const GiB = 1024 ** 3

/** The usage error (exit 2) that `argv` gets, as its message. */
function refused (argv: string[], environment: NodeJS.ProcessEnv = env): string {
  try {
    parse(argv, environment)
  } catch (err) {
    if (err instanceof CliError && err.exitCode === EXIT.USAGE) return err.message
    throw err
  }
  throw new Error(`${argv.join(' ')} was accepted`)
}

t.test('keys create: every limit, sizes in binary units; absent limits stay absent', async t => {
  t.same(parse(['keys', 'create', '--name', 'ci-main', '--admin', '--max-file-size', '2G', '--quota', '50GiB', '--max-downloads', '3',
    '--max-expiry-hours', '48', '--max-sessions', '4', '--uploads-per-minute', '10', '--expires-in-hours', '720', '--json', '-q'], env), {
    command: 'keys',
    action: 'create',
    url: 'http://drop.test',
    key: 'admin-secret',
    json: true,
    quiet: true,
    retries: 5,
    request: {
      name: 'ci-main',
      admin: true,
      max_file_size: 2 * GiB,
      quota_bytes: 50 * GiB,
      max_downloads: 3,
      max_expiry_hours: 48,
      max_open_sessions: 4,
      uploads_per_minute: 10,
      expires_in_hours: 720
    }
  })
  const plain = parse(['keys', 'create', '--name', 'ci', '--max-file-size', '512M'], env)
  t.same(plain.command === 'keys' && plain.action === 'create' && plain.request, { name: 'ci', max_file_size: 512 * 1024 * 1024 })
  t.notOk(plain.command === 'keys' && plain.action === 'create' && 'admin' in plain.request, 'no admin field without --admin')
})

t.test('keys list, revoke, rotate: the name is the argument; --grace in seconds or a duration', async t => {
  t.match(parse(['keys', 'list', '--url', 'http://other.test', '--key', 'k2', '--retries', '0'], env),
    { command: 'keys', action: 'list', url: 'http://other.test', key: 'k2', retries: 0 })
  t.match(parse(['keys', 'revoke', 'ci-main'], env), { command: 'keys', action: 'revoke', name: 'ci-main' })
  t.match(parse(['keys', 'rotate', 'ci'], env), { action: 'rotate', name: 'ci', graceSeconds: undefined })
  for (const [grace, seconds] of [['3600', 3600], ['90s', 90], ['10m', 600], ['1h', 3600], ['2d', 172_800], ['0', 0]] as const) {
    t.match(parse(['keys', 'rotate', 'ci', '--grace', grace], env), { graceSeconds: seconds }, `--grace ${grace}`)
  }
})

t.test('keys: help, and usage errors (exit 2) that never reach the service', async t => {
  for (const argv of [['keys'], ['keys', '--help'], ['keys', 'create', '--help'], ['help', 'keys']]) {
    t.same(parse(argv, {}), { command: 'help', text: HELP.keys }, argv.join(' '))
  }
  t.match(HELP.main, /keys <action>/, 'listed in the usage')
  for (const [argv, message] of [
    [['keys', 'frobnicate'], /unknown keys action "frobnicate"/],
    [['keys', 'create'], /keys create needs --name NAME/],
    [['keys', 'create', 'ci'], /unexpected argument "ci"/],
    [['keys', 'create', '--name', 'a/../b'], /"a\/..\/b" is not a key name/],
    [['keys', 'create', '--name', 'x'.repeat(65)], /is not a key name/],
    [['keys', 'create', '--name', 'ci', '--quota', 'lots'], /--quota must be a size/],
    [['keys', 'create', '--name', 'ci', '--max-sessions', '0'], /--max-sessions must be a positive integer/],
    [['keys', 'create', '--name', 'ci', '--grace', '1h'], /Unknown option '--grace'/],
    [['keys', 'list', '--name', 'ci'], /Unknown option '--name'/],
    [['keys', 'list', 'extra'], /unexpected argument "extra"/],
    [['keys', 'revoke'], /keys revoke needs a key's name/],
    [['keys', 'revoke', 'a', 'b'], /unexpected argument "b"/],
    [['keys', 'rotate', 'ci', '--grace', '1w'], /--grace must be seconds or a duration/],
    [['keys', 'rotate', 'ci', '--grace', '-5'], /--grace/]
  ] as Array<[string[], RegExp]>) {
    t.match(refused(argv), message, argv.join(' '))
  }
})

t.test('keys: no admin key or no URL is a usage error, as for upload', async t => {
  t.match(refused(['keys', 'list'], { DROPCODE_URL: 'http://drop.test' }), /no admin key: pass --key or set DROPCODE_KEY/)
  t.match(refused(['keys', 'list'], { DROPCODE_URL: 'http://drop.test', DROPCODE_KEY: '' }), /no admin key/)
  t.match(refused(['keys', 'list'], { DROPCODE_KEY: 'k' }), /no service URL/)
  t.match(refused(['upload', 'x'], { DROPCODE_URL: 'http://drop.test' }), /no API key: pass --key or set DROPCODE_KEY/)
})

t.test('the other commands parse as before', async t => {
  t.match(parse(['upload', 'dist', '--chunk-size', '16M', '--key', 'k'], { DROPCODE_URL: 'http://x.test' }), { command: 'upload', path: 'dist', key: 'k', chunkSize: 16 * 1024 * 1024 })
  t.match(refused(['info']), /info needs a code/)
  t.match(parse(['delete', 'ABC123', '--url', 'http://x.test'], {}), { command: 'delete', code: 'ABC123', url: 'http://x.test' })
})
