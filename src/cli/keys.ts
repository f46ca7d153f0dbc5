/**
 * `dropcode keys create|list|revoke|rotate`: the service's admin API (/admin/keys) with an admin
 * key. A secret exists in one answer only (create, rotate): the service keeps its digest. So a
 * retried create whose first attempt got no answer may find its own key (409 KEY_EXISTS) and
 * no secret to show, and a retried rotate may rotate twice; both are said, never hidden.
 */
import type { KeyListAnswer, KeyRevokeAnswer, KeySecretAnswer } from '../api/answers.js'
import type { KeysArgs, KeysCreateArgs, KeysNameArgs, KeysRotateArgs } from './args.js'
import { CliError, EXIT } from './exit-codes.js'
import { jsonBody, Retryable, type Client } from './http.js'
import { humanTime } from './units.js'

/** The service's code on a CliError made from its answer (http.ts answerError keeps the body). */
const codeOf = (err: unknown): string | undefined => {
  const body = err instanceof CliError ? (err as CliError & { body?: Record<string, unknown> }).body : undefined
  return typeof body?.code === 'string' ? body.code : undefined
}

/**
 * A failure whose request may have been carried out: no answer, a proxy's (a 502 or 504 may
 * come after the service acted) or a 5xx. The service's 408 and 429 say nothing was done.
 */
const mayHaveActed = (err: Retryable) => !(err.fromService && (err.status === 408 || err.status === 429))

/** The admin API's refusals that mean the same for every action, in its words. */
function refusal (err: unknown, name?: string): unknown {
  const code = codeOf(err)
  if (code === 'DROPCODE_FORBIDDEN') return new CliError(EXIT.REFUSED, 'refused: the key given (--key or $DROPCODE_KEY) is no admin key, and managing keys takes one (403 DROPCODE_FORBIDDEN)')
  if (code === 'DROPCODE_KEY_NOT_FOUND') return new CliError(EXIT.NOT_FOUND, `no key named ${name ?? '?'} in the key store; keys from API_KEYS are managed in the server's environment (404 DROPCODE_KEY_NOT_FOUND)`)
  // A service from before the keys API: its 404 is about the route, not a key.
  if (code === 'DROPCODE_ROUTE_NOT_FOUND') return new CliError(EXIT.REFUSED, `the service has no keys API at ${err instanceof Error ? (/^(\S+) is no endpoint/.exec(err.message)?.[1] ?? 'this URL') : 'this URL'} (404 DROPCODE_ROUTE_NOT_FOUND): either it predates API keys as data, or --url is not the service's root`)
  return err
}

/** Retries spent on failures that may have been carried out: the final message says what may have happened. */
function unsure (err: unknown, note: string): unknown {
  return err instanceof CliError && err.exitCode === EXIT.NETWORK ? new CliError(EXIT.NETWORK, `${err.message}; ${note}`) : err
}

/**
 * Runs one admin request with the client's retries, noting whether an attempt that failed may
 * have been carried out (`acted`: then `after` turns the final error into what it means).
 */
async function admin<T> (client: Client, what: string, run: () => Promise<T>, after: (err: unknown, acted: boolean) => unknown): Promise<{ answer: T, acted: boolean }> {
  let acted = false
  try {
    const answer = await client.retrying(what, async () => {
      try {
        return await run()
      } catch (err) {
        if (err instanceof Retryable && mayHaveActed(err)) acted = true
        throw err
      }
    })
    return { answer, acted }
  } catch (err) {
    throw after(err, acted)
  }
}

export async function createKey (args: KeysCreateArgs, client: Client): Promise<KeySecretAnswer> {
  const { name } = args.request
  return (await admin(client, 'create key', async () => await client.once<KeySecretAnswer>('POST', '/admin/keys', jsonBody(args.request)), (err, acted) => {
    if (acted) err = unsure(err, `the key may have been created all the same, without a secret to show: "dropcode keys list" shows whether ${name} exists`)
    if (codeOf(err) !== 'DROPCODE_KEY_EXISTS') return refusal(err, name)
    return new CliError(EXIT.REFUSED, acted
      ? `a key named ${name} exists: the key may have been created by the first attempt (its answer, which held the secret, was lost); revoke and create it again, or rotate it, to get a secret (409 DROPCODE_KEY_EXISTS)`
      : `a key named ${name} exists already; rotate it for a new secret, or choose another name (409 DROPCODE_KEY_EXISTS)`)
  })).answer
}

export async function listKeys (args: KeysArgs, client: Client): Promise<KeyListAnswer> {
  return (await admin(client, 'list keys', async () => await client.once<KeyListAnswer>('GET', '/admin/keys'), err => refusal(err))).answer
}

export async function revokeKey (args: KeysNameArgs, client: Client): Promise<KeyRevokeAnswer> {
  return (await admin(client, 'revoke key', async () => await client.once<KeyRevokeAnswer>('DELETE', `/admin/keys/${encodeURIComponent(args.name)}`), (err, acted) => {
    const final = refusal(err, args.name)
    if (!acted || !(final instanceof CliError) || final.exitCode !== EXIT.NOT_FOUND) return final
    return new CliError(EXIT.NOT_FOUND, `${final.message}; an earlier attempt whose answer was lost may have revoked it`)
  })).answer
}

export interface Rotated {
  answer: KeySecretAnswer
  /** An attempt before the one answered may have rotated the key already. */
  repeated: boolean
}

export async function rotateKey (args: KeysRotateArgs, client: Client): Promise<Rotated> {
  const body = jsonBody(args.graceSeconds !== undefined ? { grace_seconds: args.graceSeconds } : {})
  const { answer, acted } = await admin(client, 'rotate key',
    async () => await client.once<KeySecretAnswer>('POST', `/admin/keys/${encodeURIComponent(args.name)}/rotate`, body),
    (err, acted) => refusal(acted ? unsure(err, 'the key may have been rotated all the same: its secret in use then works only until the grace runs out; rotate it again for a secret') : err, args.name))
  return { answer, repeated: acted }
}

/** What `keys rotate` says on stderr besides the secret on stdout. */
export function rotatedNote ({ answer, repeated }: Rotated): string {
  const until = answer.previous_secret_until
  const old = until !== null ? `the previous secret works until ${humanTime(until)}` : 'the previous secret no longer works'
  // A second rotation makes the lost first secret the "previous" one: the one in use is dead.
  const twice = repeated ? '; an earlier attempt whose answer was lost may have rotated it already, so the secret in use before may no longer work at all' : ''
  return `new secret of key ${answer.name}, shown this once; ${old}${twice}`
}
