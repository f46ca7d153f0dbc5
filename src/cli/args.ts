/**
 * Command-line parsing (node:util parseArgs, strict): one option table per command, the
 * environment for --url/--key, and the help texts. Nothing here touches the network.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import type { KeyCreateRequest } from '../api/answers.js'
import { VERSION } from '../core/version.js'
import { CliError, EXIT } from './exit-codes.js'
import { parseDuration } from './units.js'

export const MiB = 1024 * 1024

/**
 * Bounds of `download --extract` (docs/cli.md, "Extracting"): entries, and bytes of content
 * unless the archive itself is larger (an uncompressed tar never holds more than its own size,
 * so the size bound only stops compression bombs).
 */
export const DEFAULT_MAX_ENTRIES = 20_000
export const DEFAULT_MAX_SIZE = 5 * 1024 * MiB

const common = {
  url: { type: 'string' },
  quiet: { type: 'boolean', short: 'q' },
  json: { type: 'boolean' },
  retries: { type: 'string' },
  help: { type: 'boolean', short: 'h' }
} as const satisfies ParseArgsConfig['options']

const OPTIONS = {
  upload: {
    ...common,
    key: { type: 'string' },
    'max-downloads': { type: 'string' },
    'expiry-hours': { type: 'string' },
    'chunk-size': { type: 'string' },
    parallel: { type: 'string' },
    name: { type: 'string' }
  },
  download: {
    ...common,
    output: { type: 'string', short: 'o' },
    force: { type: 'boolean', short: 'f' },
    extract: { type: 'boolean', short: 'x' },
    'max-entries': { type: 'string' },
    'max-size': { type: 'string' }
  },
  info: common,
  delete: common
} as const satisfies Record<string, ParseArgsConfig['options']>

/** `dropcode keys <action>`: the admin API, each action with its own options. */
const KEYS_OPTIONS = {
  create: {
    ...common,
    key: { type: 'string' },
    name: { type: 'string' },
    admin: { type: 'boolean' },
    'max-file-size': { type: 'string' },
    quota: { type: 'string' },
    'max-downloads': { type: 'string' },
    'max-expiry-hours': { type: 'string' },
    'max-sessions': { type: 'string' },
    'uploads-per-minute': { type: 'string' },
    'expires-in-hours': { type: 'string' }
  },
  list: { ...common, key: { type: 'string' } },
  revoke: { ...common, key: { type: 'string' } },
  rotate: { ...common, key: { type: 'string' }, grace: { type: 'string' } }
} as const satisfies Record<string, ParseArgsConfig['options']>

export type Command = keyof typeof OPTIONS | 'keys'
export type KeysAction = keyof typeof KEYS_OPTIONS

/** A key's name as the service takes it; checked here too, since revoke and rotate put it in the path. */
const KEY_NAME = /^[A-Za-z0-9._-]{1,64}$/

const USAGE = `Usage: dropcode <command> [options]

Commands:
  upload <path|->     upload a file, a directory (as a tar) or stdin; prints the code
  download <code>     download a file, verify its digest (resumes a cut download)
  info <code>         show a file's name, size and digest (counts no download)
  delete <code>       delete a file
  keys <action>       manage API keys (create, list, revoke, rotate; takes an admin key)

Run "dropcode <command> --help" for a command's options; "dropcode --version" for the version.
Server and key: --url/--key or DROPCODE_URL/DROPCODE_KEY. Documentation: docs/cli.md.
`

const COMMON_HELP = `  --url URL            the service (default: $DROPCODE_URL)
  --retries N          retries of a failed request: network errors, 408, 429, 500,
                       502, 503, 504 (default 5);
                       waiting out a 409's Retry-After (a lock in the way) is not one
  --json               print the result as JSON on stdout
  -q, --quiet          no progress or messages on stderr (errors still print)
  -h, --help           this help`

export const HELP: Record<Command | 'main', string> = {
  main: USAGE,
  upload: `Usage: dropcode upload <path|-> [options]

Uploads a file, a directory (sent as NAME.tar, streamed, never copied to disk) or standard
input ("-"). Prints only the code on stdout (CODE=$(dropcode upload dist/)). Files larger
than one chunk go as a chunked session with several chunks in flight; rerunning the same
command after an interruption resumes it (files and directories; not stdin).

Options:
  --key KEY            API key, sent as X-Client-Key (default: $DROPCODE_KEY)
  --max-downloads N    downloads allowed (service default 1)
  --expiry-hours H     hours until the file expires (service default 24)
  --chunk-size SIZE    bytes per chunk: 8M, 16MiB, 1048576 (default: what the service suggests, 64M on its
                       filesystem storage, its part size on S3, else 8M; its MAX_CHUNK_SIZE caps it)
  --parallel N         chunks in flight (default: what the service suggests, 1 on its
                       filesystem storage, 4 on S3; 4 if it does not say)
  --name NAME          filename to store (default: the base name; NAME.tar for a directory; "stdin")
${COMMON_HELP}
`,
  download: `Usage: dropcode download <code> [options]

Downloads into the current directory under the uploaded name (from Content-Disposition:
base name only, never outside the directory), verifying the SHA-256 the service sends
(Repr-Digest). A cut download resumes by itself, and rerunning the command resumes a killed
one within the service's resume window. On a digest mismatch the partial file is removed.

Options:
  -o, --output PATH    write to PATH ("-": standard output; with --extract: a directory)
  -f, --force          overwrite an existing file; with --extract, replace each of the archive's
                       top-level entries that exists (whole: the tree becomes exactly the archive's)
  -x, --extract        unpack the downloaded tar, all or nothing: into PATH (default: here) if it
                       does not exist, else its top-level entries into it if none of them exists
                       (exit 8 if one does, nothing changed; --force replaces them);
                       refused (exit 8, nothing written) for absolute paths, "..", links that lead
                       out (also through other links), devices, FIFOs, or over a bound
  --max-entries N      with --extract: entries at most (default ${DEFAULT_MAX_ENTRIES})
  --max-size SIZE      with --extract: bytes of content at most (default 5G, or the archive's size if larger)
${COMMON_HELP}
`,
  info: `Usage: dropcode info <code> [options]

Shows the file's name, size, type and SHA-256 (a HEAD request: counts no download).

Options:
${COMMON_HELP}
`,
  delete: `Usage: dropcode delete <code> [options]

Deletes the file: no more downloads with this code.

Options:
${COMMON_HELP}
`,
  keys: `Usage: dropcode keys <action> [options]

Manages the service's API keys (its admin API). Takes an admin key: --key or $DROPCODE_KEY.
A secret is shown once, when a key is created or rotated: stdout carries only the secret
(KEY=$(dropcode keys create --name ci)), stderr says so.

Actions:
  create --name NAME [limits]   create a key; prints its secret
  list                          the keys, their limits and usage (never a secret)
  revoke NAME                   revoke a key of the key store (API_KEYS' keys are the server's)
  rotate NAME [--grace T]       a new secret; the old one works for T more (default: the
                                service's, 1 hour). T: seconds, or 90s, 10m, 1h, 2d; 0: not at all

Limits of create (absent: the service's own; none may exceed it):
  --admin                     the key may manage keys
  --max-file-size SIZE        bytes of one file: 512M, 2G
  --quota SIZE                bytes the key may hold at once (live files, open sessions)
  --max-downloads N           downloads a file may allow
  --max-expiry-hours N        hours a file may live
  --max-sessions N            chunked upload sessions open at once
  --uploads-per-minute N      new uploads per minute
  --expires-in-hours N        the key itself is refused after N hours (default: never)

Options:
  --key KEY            an admin API key, sent as X-Client-Key (default: $DROPCODE_KEY)
${COMMON_HELP}
`
}

export interface Common {
  url: string
  quiet: boolean
  json: boolean
  retries: number
}

export interface UploadArgs extends Common {
  command: 'upload'
  path: string
  key: string
  maxDownloads?: number | undefined
  expiryHours?: number | undefined
  /** Bytes per chunk; undefined: the service's `chunk_size` hint (GET /limits), else 8 MiB. */
  chunkSize: number | undefined
  /** Chunks in flight; undefined: the service's `chunks_in_flight` hint (GET /limits), else 4. */
  parallel: number | undefined
  name?: string | undefined
}

export interface DownloadArgs extends Common {
  command: 'download'
  code: string
  output?: string | undefined
  force: boolean
  extract: boolean
  /** --extract: entries at most. */
  maxEntries: number
  /** --extract: bytes of content at most; undefined: DEFAULT_MAX_SIZE or the archive's size. */
  maxSize: number | undefined
}

export interface CodeArgs extends Common {
  command: 'info' | 'delete'
  code: string
}

interface KeysCommon extends Common {
  command: 'keys'
  /** The admin key. */
  key: string
}

export interface KeysCreateArgs extends KeysCommon {
  action: 'create'
  request: KeyCreateRequest
}

export interface KeysListArgs extends KeysCommon {
  action: 'list'
}

export interface KeysNameArgs extends KeysCommon {
  action: 'revoke'
  name: string
}

export interface KeysRotateArgs extends KeysCommon {
  action: 'rotate'
  name: string
  /** Seconds the old secret keeps working; undefined: the service's default. */
  graceSeconds?: number | undefined
}

export type KeysArgs = KeysCreateArgs | KeysListArgs | KeysNameArgs | KeysRotateArgs

/**
 * Text to print and exit with: help asked for (stdout, 0), `--version` (stdout, 0), or no
 * command at all (the usage on stderr, 2: a script that lost its arguments must not pass).
 */
export interface HelpArgs { command: 'help', text: string, exitCode?: 0 | 2 }

export type Args = UploadArgs | DownloadArgs | CodeArgs | KeysArgs | HelpArgs

const usage = (message: string) => new CliError(EXIT.USAGE, `${message} (see --help)`)

function positiveInt (name: string, value: string | undefined, fallback?: number): number | undefined {
  if (value === undefined) return fallback
  if (!/^[1-9]\d{0,8}$/.test(value)) throw usage(`--${name} must be a positive integer, not "${value}"`)
  return Number(value)
}

/** "8M", "8MiB", "512k", "1G", "1048576" → bytes (binary units). */
export function parseSize (value: string, name = 'chunk-size'): number {
  const m = /^(\d+)\s*([kmgt]?)(?:i?b)?$/i.exec(value.trim())
  if (m === null) throw usage(`--${name} must be a size such as 8M or 1048576, not "${value}"`)
  const size = Number(m[1]) * ({ '': 1, k: 1024, m: MiB, g: 1024 * MiB, t: 1024 * 1024 * MiB } as Record<string, number>)[m[2]!.toLowerCase()]!
  if (size < 1) throw usage(`--${name} must be at least one byte`)
  return size
}

type Values = Record<string, string | boolean | undefined>

function options (args: string[], table: ParseArgsConfig['options']): { v: Values, positionals: string[] } {
  try {
    const parsed = parseArgs({ args, options: table, allowPositionals: true, strict: true })
    return { v: parsed.values as Values, positionals: parsed.positionals }
  } catch (err) {
    throw usage((err as Error).message)
  }
}

function commonOf (v: Values, env: NodeJS.ProcessEnv): Common {
  const url = (v.url as string | undefined) ?? env.DROPCODE_URL
  if (url === undefined || url === '') throw usage('no service URL: pass --url or set DROPCODE_URL')
  return { url, quiet: v.quiet === true, json: v.json === true, retries: (v.retries === '0' ? 0 : positiveInt('retries', v.retries as string | undefined, 5))! }
}

function keyOf (v: Values, env: NodeJS.ProcessEnv, what: string): string {
  const key = (v.key as string | undefined) ?? env.DROPCODE_KEY
  if (key === undefined || key === '') throw usage(`no ${what}: pass --key or set DROPCODE_KEY`)
  return key
}

export function parse (argv: string[], env: NodeJS.ProcessEnv): Args {
  const command = argv[0]
  if (command === undefined) return { command: 'help', text: USAGE, exitCode: 2 }
  if (command === '--version' || command === '-V' || command === 'version') return { command: 'help', text: `dropcode ${VERSION}\n` }
  if (command === '--help' || command === '-h' || command === 'help') {
    const topic = argv[1]
    return { command: 'help', text: topic !== undefined && (topic in OPTIONS || topic === 'keys') ? HELP[topic as Command] : USAGE }
  }
  if (command === 'keys') return parseKeys(argv.slice(1), env)
  if (!(command in OPTIONS)) throw usage(`unknown command "${command}"`)
  const cmd = command as keyof typeof OPTIONS
  const { v, positionals } = options(argv.slice(1), OPTIONS[cmd])
  if (v.help === true) return { command: 'help', text: HELP[cmd] }
  const [target, ...extra] = positionals
  if (target === undefined) throw usage(`${cmd} needs ${cmd === 'upload' ? 'a path (or - for standard input)' : 'a code'}`)
  if (extra.length > 0) throw usage(`unexpected argument "${extra[0]}"`)
  const base = commonOf(v, env)

  if (cmd === 'upload') {
    return {
      ...base,
      command: 'upload',
      path: target,
      key: keyOf(v, env, 'API key'),
      maxDownloads: positiveInt('max-downloads', v['max-downloads'] as string | undefined),
      expiryHours: positiveInt('expiry-hours', v['expiry-hours'] as string | undefined),
      chunkSize: v['chunk-size'] !== undefined ? parseSize(v['chunk-size'] as string) : undefined,
      parallel: positiveInt('parallel', v.parallel as string | undefined),
      name: v.name as string | undefined
    }
  }
  if (cmd === 'download') {
    return {
      ...base,
      command: 'download',
      code: target,
      output: v.output as string | undefined,
      force: v.force === true,
      extract: v.extract === true,
      maxEntries: positiveInt('max-entries', v['max-entries'] as string | undefined, DEFAULT_MAX_ENTRIES)!,
      maxSize: v['max-size'] !== undefined ? parseSize(v['max-size'] as string, 'max-size') : undefined
    }
  }
  return { ...base, command: cmd, code: target }
}

const defined = <T extends object>(value: T): T => Object.fromEntries(Object.entries(value).filter(([, x]) => x !== undefined)) as T

function keyName (name: string | undefined, action: string): string {
  if (name === undefined) throw usage(action === 'create' ? 'keys create needs --name NAME' : `keys ${action} needs a key's name`)
  if (!KEY_NAME.test(name)) throw usage(`"${name}" is not a key name (1 to 64 of A-Z a-z 0-9 . _ -)`)
  return name
}

/** `keys <action> …` (argv without "keys"). */
function parseKeys (argv: string[], env: NodeJS.ProcessEnv): Args {
  const action = argv[0]
  if (action === undefined || action === '--help' || action === '-h' || action === 'help') return { command: 'help', text: HELP.keys }
  if (!(action in KEYS_OPTIONS)) throw usage(`unknown keys action "${action}" (create, list, revoke, rotate)`)
  const act = action as KeysAction
  const { v, positionals } = options(argv.slice(1), KEYS_OPTIONS[act])
  if (v.help === true) return { command: 'help', text: HELP.keys }
  const [target, ...extra] = positionals
  // create names its key with --name (a limit's value is never mistaken for it); revoke and rotate take it alone.
  const named = act === 'revoke' || act === 'rotate'
  const unexpected = named ? extra[0] : target
  if (unexpected !== undefined) throw usage(`unexpected argument "${unexpected}"`)
  const base = { ...commonOf(v, env), command: 'keys' as const, key: keyOf(v, env, 'admin key') }
  const str = (name: string) => v[name] as string | undefined
  switch (act) {
    case 'list': return { ...base, action: 'list' }
    case 'revoke': return { ...base, action: 'revoke', name: keyName(target, act) }
    case 'rotate': {
      const grace = str('grace')
      return { ...base, action: 'rotate', name: keyName(target, act), graceSeconds: grace !== undefined ? parseDuration(grace, 'grace') : undefined }
    }
    case 'create': {
      const size = (name: string) => str(name) !== undefined ? parseSize(str(name)!, name) : undefined
      const int = (name: string) => positiveInt(name, str(name))
      // Absent fields stay absent: the service's own limits apply.
      const request = defined<KeyCreateRequest>({
        name: keyName(str('name'), act),
        admin: v.admin === true ? true : undefined,
        max_file_size: size('max-file-size'),
        quota_bytes: size('quota'),
        max_downloads: int('max-downloads'),
        max_expiry_hours: int('max-expiry-hours'),
        max_open_sessions: int('max-sessions'),
        uploads_per_minute: int('uploads-per-minute'),
        expires_in_hours: int('expires-in-hours')
      })
      return { ...base, action: 'create', request }
    }
  }
}
