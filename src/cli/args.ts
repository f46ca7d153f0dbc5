/**
 * Command-line parsing (node:util parseArgs, strict): one option table per command, the
 * environment for --url/--key, and the help texts. Nothing here touches the network.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { CliError, EXIT } from './exit-codes.js'

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

export type Command = keyof typeof OPTIONS

const USAGE = `Usage: dropcode <command> [options]

Commands:
  upload <path|->     upload a file, a directory (as a tar) or stdin; prints the code
  download <code>     download a file, verify its digest (resumes a cut download)
  info <code>         show a file's name, size and digest (counts no download)
  delete <code>       delete a file

Run "dropcode <command> --help" for a command's options.
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
  -f, --force          overwrite an existing file (not with --extract: it never writes into an existing tree)
  -x, --extract        unpack the downloaded tar, all or nothing: into PATH (default: here) if it
                       does not exist, else its top-level entries into it if none of them exists;
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

export type Args = UploadArgs | DownloadArgs | CodeArgs | { command: 'help', text: string }

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

export function parse (argv: string[], env: NodeJS.ProcessEnv): Args {
  const command = argv[0]
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    const topic = argv[1]
    return { command: 'help', text: topic !== undefined && topic in OPTIONS ? HELP[topic as Command] : USAGE }
  }
  if (!(command in OPTIONS)) throw usage(`unknown command "${command}"`)
  const cmd = command as Command
  let parsed
  try {
    parsed = parseArgs({ args: argv.slice(1), options: OPTIONS[cmd], allowPositionals: true, strict: true })
  } catch (err) {
    throw usage((err as Error).message)
  }
  const v = parsed.values as Record<string, string | boolean | undefined>
  if (v.help === true) return { command: 'help', text: HELP[cmd] }
  const [target, ...extra] = parsed.positionals
  if (target === undefined) throw usage(`${cmd} needs ${cmd === 'upload' ? 'a path (or - for standard input)' : 'a code'}`)
  if (extra.length > 0) throw usage(`unexpected argument "${extra[0]}"`)
  const url = (v.url as string | undefined) ?? env.DROPCODE_URL
  if (url === undefined || url === '') throw usage('no service URL: pass --url or set DROPCODE_URL')
  const base: Common = { url, quiet: v.quiet === true, json: v.json === true, retries: (v.retries === '0' ? 0 : positiveInt('retries', v.retries as string | undefined, 5))! }

  if (cmd === 'upload') {
    const key = (v.key as string | undefined) ?? env.DROPCODE_KEY
    if (key === undefined || key === '') throw usage('no API key: pass --key or set DROPCODE_KEY')
    return {
      ...base,
      command: 'upload',
      path: target,
      key,
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
