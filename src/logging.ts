/**
 * Logger options: pino JSON, one line per request, and nothing secret in it. API keys are
 * redacted; whatever in a URL could be a download code, an upload id or a claim is cut to its
 * first two characters (core/mask.ts), enough to correlate a complaint without handing the
 * secret to whoever reads the logs; state errors lose the arguments of their Redis command.
 */
import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import pino from 'pino'
import { StartupError } from './core/errors.js'
import { maskSecret } from './core/mask.js'

/**
 * Where log lines go: stdout, written synchronously in batches of at least LOG_BATCH_BYTES, and
 * at least every LOG_FLUSH_MS, and at exit. pino's default stdout stream writes asynchronously,
 * 16 KiB per event-loop turn, and buffers without bound: under a sustained request rate the
 * waiting lines grew the heap for ever (measured over one keep-alive connection: ~600 bytes per
 * request). One synchronous write per line kept memory flat but cost a system call per line, a
 * tenth of a 404's time (issue 21). A batch is written by the request that fills it, so what
 * waits is bounded by the batch (never by the rate), and a stdout nobody reads stalls the
 * process, as it would any program; every container runtime and process manager reads it. What
 * a kill -9 loses: at most the last LOG_FLUSH_MS of lines.
 */
export async function logDestination (format: 'json' | 'pretty' = 'json'): Promise<pino.DestinationStream> {
  if (format === 'json') return stdoutLines()
  try {
    const { default: pretty } = await import('pino-pretty')
    return pretty({ colorize: process.stdout.isTTY, sync: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' })
  } catch (err) {
    throw new StartupError('LOG_FORMAT=pretty needs pino-pretty, a development dependency that is not installed', 'run npm install (with dev dependencies), or use LOG_FORMAT=json', { cause: err })
  }
}
/**
 * stdout's batched writer, one per process, however many apps it builds (the tests build
 * hundreds): stdout is the process's, and each writer adds a flush timer and an exit listener.
 */
let stdoutWriter: pino.DestinationStream | undefined
function stdoutLines (): pino.DestinationStream {
  if (stdoutWriter !== undefined) return stdoutWriter
  const out = pino.destination({ dest: 1, sync: true, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS })
  process.once('exit', () => { try { out.flushSync() } catch { /* stdout gone */ } })
  stdoutWriter = out
  return out
}

/** Bytes of log lines written at once (a batch; see logDestination). */
export const LOG_BATCH_BYTES = 4096
/** ms a log line waits at most for its batch to fill. */
export const LOG_FLUSH_MS = 100
export type LogDestination = pino.DestinationStream

/**
 * The fixed words of dropcode's paths. Any other path segment is masked: a code or an id can
 * stand anywhere a client puts it (`/d/CODE/extra`, `/CODE`, `/assets/CODE`), and a route added
 * later without its words here shows them masked, which is safe (a test lists the routes).
 */
export const PATH_WORDS = new Set(['', 'd', 'download', 'delete', 'upload', 'start', 'chunk', 'verify', 'complete',
  'limits', 'healthz', 'readyz', 'metrics', 'openapi.json', 'assets', 'admin', 'keys', 'rotate', 'cli', 'dropcode.mjs', 'key', 'files'])
/** Query parameter names shown as they are (values never are): the interface's field names. */
const QUERY_NAMES = new Set(['code', 'upload_id', 'chunk_index', 'total_chunks', 'filename', 'max_downloads', 'expiry_hours', 'sha256', 'chunk_sha256'])

const maskQuery = (query: string) => query.split('&').map(pair => {
  const eq = pair.indexOf('=')
  const name = eq === -1 ? pair : pair.slice(0, eq)
  const shown = QUERY_NAMES.has(name) ? name : maskSecret(name)
  return eq === -1 ? shown : `${shown}=${maskSecret(pair.slice(eq + 1))}`
}).join('&')

/**
 * A request target as logged: fixed words kept, every other path segment and every query value
 * masked. Anything after `;` or `#` (which routers may treat as the path's end) is masked too.
 * @param servedFile the path named a file that was served (a static asset), so it holds no secret
 */
export function maskUrl (url: string, servedFile = false): string {
  const end = url.search(/[?;#]/)
  const path = end === -1 ? url : url.slice(0, end)
  // A served path is kept only in plain form: `/assets/CODE/../app.js` serves app.js too.
  const plain = servedFile && /^[\w./-]*$/.test(path) && !/\/\.\.?(\/|$)/.test(path)
  const shown = plain ? path : path.split('/').map(s => PATH_WORDS.has(s) ? s : maskSecret(s)).join('/')
  if (end === -1) return shown
  const rest = url.slice(end + 1)
  return `${shown}${url[end]}${url[end] === '?' ? maskQuery(rest) : maskSecret(rest)}`
}

/**
 * pino's error serializer, minus the arguments of a failed Redis command: ioredis puts the
 * command on its errors (`command: { name, args }`), and the args hold keys with codes, claim
 * ids and upload ids.
 */
export function serializeError (err: Error): ReturnType<typeof pino.stdSerializers.err> {
  return withoutCommandArgs(pino.stdSerializers.err(err), 0) as ReturnType<typeof pino.stdSerializers.err>
}

/** `value` with every `command.args` left out; copies what it changes, never the logged error itself. */
function withoutCommandArgs (value: unknown, depth: number): unknown {
  if (depth > 4 || value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || value instanceof Date) return value
  if (Array.isArray(value)) return value.map(v => withoutCommandArgs(v, depth + 1))
  const out: Record<string, unknown> = depth === 0 ? value as Record<string, unknown> : { ...value }
  for (const [key, v] of Object.entries(out)) {
    const command = v as { name?: unknown, args?: unknown } | null
    out[key] = key === 'command' && command !== null && typeof command === 'object' && 'args' in command
      ? { name: command.name }
      : withoutCommandArgs(v, depth + 1)
  }
  return out
}

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 }

/** Whether `log` writes lines at `level` (false for every level at `silent`). */
export const writesAt = (log: FastifyBaseLogger, level: 'info' | 'warn' | 'error'): boolean =>
  LEVELS[level]! >= (LEVELS[log.level] ?? Infinity)

export function loggerOptions (level: string, stream: LogDestination) {
  return {
    level,
    stream,
    redact: { paths: ['req.headers["x-client-key"]', 'req.headers.authorization'], censor: '[redacted]' },
    serializers: {
      req (req: FastifyRequest) {
        return { method: req.method, url: maskUrl(req.url), remoteAddress: req.ip }
      },
      err: serializeError
    }
  }
}
