/**
 * The CLI's exit codes, one per kind of failure a script may want to tell apart. They are part
 * of the CLI's interface (docs/cli.md): never renumber them.
 */
export const EXIT = {
  OK: 0,
  /** Anything unexpected (a bug): the message says what. */
  FAILURE: 1,
  /** Bad arguments or options, a missing --url/--key. */
  USAGE: 2,
  /** 401: the API key is missing or not accepted. */
  AUTH: 3,
  /** 404: unknown, expired, exhausted or deleted code (or upload session), or no such key in the key store (keys revoke, rotate). */
  NOT_FOUND: 4,
  /** The bytes differ from their digest (download), or the service saw a different SHA-256 (upload). */
  INTEGRITY: 5,
  /** The service could not be reached, or kept answering 5xx/429, after every retry. */
  NETWORK: 6,
  /** The service refused the request otherwise (4xx: too large, invalid field, a key's limit or quota, not an admin key, a key name taken, …). */
  REFUSED: 7,
  /** A local problem: unreadable input, an existing output without --force, an unsafe archive. */
  LOCAL: 8
} as const

export type ExitCode = typeof EXIT[keyof typeof EXIT]

/** An error the CLI reports in one line on stderr and exits with. */
export class CliError extends Error {
  constructor (readonly exitCode: ExitCode, message: string) {
    super(message)
    this.name = 'CliError'
  }
}

/** The input's bytes differ in number from what was counted before sending them (exit 3 when final). */
export class InputChanged extends CliError {
  constructor (message: string) {
    super(EXIT.LOCAL, message)
    this.name = 'InputChanged'
  }
}

/** The exit code for a service answer that is not a success. */
export function exitForStatus (status: number, code?: string): ExitCode {
  if (code === 'DROPCODE_DIGEST_MISMATCH') return EXIT.INTEGRITY
  if (status === 401) return EXIT.AUTH
  if (status === 404) return EXIT.NOT_FOUND
  if (status >= 500 || status === 429) return EXIT.NETWORK
  return EXIT.REFUSED
}
