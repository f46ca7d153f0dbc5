/**
 * The keys API (admin keys only): create, list, revoke and rotate the API keys kept in the state
 * store. A secret is answered once, when made; lists never show one. Keys from API_KEYS are
 * listed (this instance's) but managed in the environment.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { KeyAnswer, KeyLimitsAnswer, KeyListAnswer, KeyRevokeAnswer, KeySecretAnswer, WhoAmIAnswer } from '../api/answers.js'
import type { ApiKeyRecord, KeyLimits, KeyUsage } from '../core/model.js'
import { LIMIT_FIELD, LIMIT_NAMES, type ApiKey } from '../services/keys.js'
import { errorResponses } from './schemas.js'

const HOUR = 3_600_000
const whole = (description: string, minimum = 1) => Type.Optional(Type.Integer({ minimum, maximum: Number.MAX_SAFE_INTEGER, description }))

const LimitFields = {
  max_file_size: whole('Bytes of one file.'),
  max_downloads: whole('Highest max_downloads an upload may ask for.'),
  max_expiry_hours: whole('Highest expiry_hours an upload may ask for.'),
  quota_bytes: whole('Bytes the key may hold: live files, open sessions\' chunks, uploads in flight.', 0),
  max_open_sessions: whole('Chunked sessions open at once.'),
  uploads_per_minute: whole('New uploads (POST /upload, /upload/start) per minute.')
}
const Limits = Type.Object(LimitFields)

export const KeyCreateBody = Type.Object({
  name: Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$', description: '1–64 letters, digits, dots, underscores, hyphens; not starting with env-' }),
  admin: Type.Optional(Type.Boolean({ default: false, description: 'May manage keys.' })),
  expires_in_hours: whole('Hours until the key is refused; absent: never.'),
  ...LimitFields
}, { additionalProperties: false })

const Iso = Type.Union([Type.String({ format: 'date-time' }), Type.Null()])
export const KeyResponse = Type.Object({
  name: Type.String(),
  admin: Type.Boolean(),
  source: Type.Union([Type.Literal('store'), Type.Literal('environment')]),
  created_at: Iso,
  expires_at: Iso,
  limits: Limits,
  previous_secret_until: Iso,
  usage: Type.Object({ stored_bytes: Type.Integer(), last_used_at: Iso })
})
const KeySecretResponse = Type.Object({ ...KeyResponse.properties, secret: Type.String({ description: 'The key\'s secret, shown this once: send it as X-Client-Key.' }) })
const NameParams = Type.Object({ name: Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' }) })
const RotateBody = Type.Object({
  grace_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 30 * 86_400, default: 3600, description: 'Seconds the previous secret keeps working.' }))
}, { additionalProperties: false })

const iso = (ms: number | undefined) => ms === undefined || ms === 0 ? null : new Date(ms).toISOString()

function limitsAnswer (limits: KeyLimits): KeyLimitsAnswer {
  const out: KeyLimitsAnswer = {}
  for (const limit of LIMIT_NAMES) if (limits[limit] !== undefined) out[LIMIT_FIELD[limit]] = limits[limit]
  return out
}

function fromStore (r: ApiKeyRecord, usage: KeyUsage, now: number): KeyAnswer {
  // While a rotation's grace runs, the older secrets end then (the newest has no end).
  const ends = Object.values(r.secrets).filter(until => until > now)
  return {
    name: r.name,
    admin: r.admin,
    source: 'store',
    created_at: iso(r.createdAt),
    expires_at: iso(r.expiresAt),
    limits: limitsAnswer(r.limits),
    previous_secret_until: ends.length > 0 ? iso(Math.max(...ends)) : null,
    usage: { stored_bytes: usage.bytes, last_used_at: iso(usage.lastUsedAt) }
  }
}

const fromEnvironment = (k: ApiKey, usage: KeyUsage): KeyAnswer => ({
  name: k.name,
  admin: true,
  source: 'environment',
  created_at: null,
  expires_at: null,
  limits: {},
  previous_secret_until: null,
  usage: { stored_bytes: usage.bytes, last_used_at: iso(usage.lastUsedAt) }
})

const keyRoutes: FastifyPluginAsyncTypebox<{ now: () => number }> = async (app, { now }) => {
  const { keyRing } = app
  const common = { tags: ['keys'], security: [{ apiKey: [] }] }
  const onRequest = app.adminGuards

  // The page checks a key when it is saved, not at the first upload.
  app.get('/key', {
    config: { crossOrigin: true },
    onRequest: app.keyGuard,
    schema: { ...common, summary: 'Which API key X-Client-Key is (a check that changes nothing)', response: { 200: Type.Object({ name: Type.String(), admin: Type.Boolean() }), ...errorResponses(401, 500, 503) } }
  }, async (req): Promise<WhoAmIAnswer> => ({ name: req.apiKey!.name, admin: req.apiKey!.admin }))

  app.post('/admin/keys', {
    onRequest,
    schema: { ...common, summary: 'Create an API key (admin keys only); answers its secret once', body: KeyCreateBody, response: { 201: KeySecretResponse, ...errorResponses(400, 401, 403, 409, 500, 503) } }
  }, async (req, reply): Promise<KeySecretAnswer> => {
    const { name, admin, expires_in_hours: hours } = req.body
    const limits: KeyLimits = {}
    for (const limit of LIMIT_NAMES) {
      const value = req.body[LIMIT_FIELD[limit]]
      if (value !== undefined) limits[limit] = value
    }
    const { record, secret } = await keyRing.create({ name, admin: admin ?? false, expiresAt: hours !== undefined ? now() + hours * HOUR : undefined, limits })
    req.log.info({ created: name, admin: record.admin }, 'API key created')
    reply.code(201)
    return { ...fromStore(record, { bytes: 0, lastUsedAt: 0 }, now()), secret }
  })

  app.get('/admin/keys', {
    onRequest,
    schema: { ...common, summary: 'List the API keys with their limits and usage (never their secrets)', response: { 200: Type.Object({ keys: Type.Array(KeyResponse) }), ...errorResponses(401, 403, 500, 503) } }
  }, async (): Promise<KeyListAnswer> => {
    const stored = await keyRing.list()
    const env = keyRing.environmentKeys()
    const answers = await Promise.all([
      ...env.map(async k => fromEnvironment(k, await keyRing.usage(k.name))),
      ...stored.map(async r => fromStore(r, await keyRing.usage(r.name), now()))
    ])
    return { keys: answers }
  })

  app.delete('/admin/keys/:name', {
    onRequest,
    schema: { ...common, summary: 'Revoke an API key: refused by every instance within a second', params: NameParams, response: { 200: Type.Object({ name: Type.String(), revoked: Type.Literal(true) }), ...errorResponses(401, 403, 404, 500, 503) } }
  }, async (req): Promise<KeyRevokeAnswer> => {
    await keyRing.revoke(req.params.name)
    req.log.info({ revoked: req.params.name }, 'API key revoked')
    return { name: req.params.name, revoked: true }
  })

  app.post('/admin/keys/:name/rotate', {
    onRequest,
    schema: { ...common, summary: 'A new secret for a key; the previous one works for grace_seconds more', params: NameParams, body: Type.Optional(RotateBody), response: { 200: KeySecretResponse, ...errorResponses(400, 401, 403, 404, 500, 503) } }
  }, async (req): Promise<KeySecretAnswer> => {
    const grace = req.body?.grace_seconds ?? 3600
    const { record, secret } = await keyRing.rotate(req.params.name, grace * 1000)
    req.log.info({ rotated: req.params.name, graceSeconds: grace }, 'API key rotated')
    return { ...fromStore(record, await keyRing.usage(record.name), now()), secret }
  })
}
export default keyRoutes
