/**
 * X-Client-Key authentication. Runs as an onRequest hook, before any body byte is read: the key
 * ring (services/keys.ts) says which key a secret opens, from API_KEYS (compared in constant
 * time) or the state store (by the secret's SHA-256), and each authenticated request gets
 * `apiKey` (its name, limits and rights) and `keyId` (the name: what owns the request's
 * sessions, files and usage). The name, never the secret, joins the request's log lines.
 *
 * With API_KEYS unset, the admin key is generated once and kept in DATA_DIR/admin-key (mode
 * 0600), so a restart keeps it and `dropcode keys create` has something to start from.
 *
 * Decorates the app with `keyRing`, `uploadGuards` (the onRequest hooks of every upload route)
 * and `adminGuards` (the keys API's).
 */
import fsp from 'node:fs/promises'
import path from 'node:path'
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { DropcodeError } from '../core/errors.js'
import { createKeyRing, newSecret, type ApiKey, type KeyRing } from '../services/keys.js'
import type { Config } from '../config.js'

declare module 'fastify' {
  interface FastifyInstance {
    keyRing: KeyRing
    /** onRequest hooks of every upload endpoint, in order: the key (401 before anything else), the per-key rate limit, the body type. */
    uploadGuards: onRequestAsyncHookHandler[]
    /** onRequest hooks of the keys API: an admin key (401, then 403). */
    adminGuards: onRequestAsyncHookHandler[]
    /** onRequest hook of a request that needs any valid key (401 before anything else). */
    keyGuard: onRequestAsyncHookHandler
    /** The admin key kept under DATA_DIR when API_KEYS is unset (for the start-up banner). */
    keptAdminKey: { secret: string, file: string, created: boolean } | undefined
  }
  interface FastifyRequest {
    /** The request's API key (set by the key check; null before it). */
    apiKey: ApiKey | null
    /** The name of the request's API key (set by the key check; '' before it). */
    keyId: string
  }
}

/** Reads the kept admin key, or creates it (exclusively: two processes on one DATA_DIR agree on one). */
export async function keptAdminKey (file: string): Promise<{ secret: string, file: string, created: boolean }> {
  const read = async () => (await fsp.readFile(file, 'utf8')).trim()
  try {
    const secret = newSecret()
    await fsp.mkdir(path.dirname(file), { recursive: true })
    await fsp.writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' })
    return { secret, file, created: true }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  // Created by another process a moment ago: wait for its content.
  for (let i = 0; i < 50; i++) {
    const secret = await read()
    if (secret !== '') return { secret, file, created: false }
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  throw new Error(`${file} is empty: delete it to have a new admin key generated`)
}

// RFC 2046: 1–70 characters from bchars, quoted or (without spaces) bare.
const BOUNDARY = /;\s*boundary=(?:"([0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?])"|([0-9A-Za-z'()+_\-.:=?]{1,70}))\s*(?:;|$)/i

/**
 * Rejects non-multipart bodies before any content-type parser runs (the interface wants 400),
 * and boundaries that RFC 2046 does not allow (the parser would accept them).
 */
export const requireMultipart: onRequestAsyncHookHandler = async function requireMultipart (req) {
  const type = req.headers['content-type'] ?? ''
  if (!/^multipart\/form-data\s*;/i.test(type)) throw new DropcodeError('DROPCODE_NOT_MULTIPART')
  if (!BOUNDARY.test(type)) throw new DropcodeError('DROPCODE_MALFORMED_MULTIPART', 'The multipart boundary is missing or malformed (1–70 characters, RFC 2046).')
}

export default fp(async function auth (app: FastifyInstance, { config, now }: { config: Pick<Config, 'apiKeys' | 'adminKeyFile' | 'limits' | 'maxOpenSessionsPerKey'>, now: () => number }) {
  const kept = config.adminKeyFile !== undefined ? await keptAdminKey(config.adminKeyFile) : undefined
  const keyRing = createKeyRing({ store: app.state.keys, envKeys: kept !== undefined ? [kept.secret] : config.apiKeys, config, now })
  app.decorate('keyRing', keyRing)
  app.decorate('keptAdminKey', kept)
  app.decorateRequest('apiKey', null)
  app.decorateRequest('keyId', '')
  const checkApiKey: onRequestAsyncHookHandler = async function checkApiKey (req) {
    const given = req.headers['x-client-key']
    const key = await keyRing.authenticate(typeof given === 'string' ? given : undefined)
    if (key === null) throw new DropcodeError('DROPCODE_UNAUTHORIZED')
    req.apiKey = key
    req.keyId = key.name
    req.log = req.log.child({ key: key.name })
  }
  const requireAdmin: onRequestAsyncHookHandler = async function requireAdmin (req) {
    if (req.apiKey?.admin !== true) throw new DropcodeError('DROPCODE_FORBIDDEN')
  }
  app.decorate('uploadGuards', [checkApiKey, app.rateLimits.uploads, requireMultipart])
  app.decorate('adminGuards', [checkApiKey, requireAdmin])
  app.decorate('keyGuard', checkApiKey)
}, { name: 'auth', dependencies: ['rate-limit', 'stores'] })
