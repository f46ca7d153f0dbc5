/**
 * GET /cli/dropcode.mjs: the CLI as one self-contained file (scripts/bundle-cli.mjs, built with
 * the service from the same sources), so a CI job installs the client that matches its server
 * in one line and runs it with plain `node`, Node 20 or later, no npm:
 *
 *   curl -fsSL "$DROPCODE_URL/cli/dropcode.mjs" -o dropcode && node dropcode upload dist/
 *
 * Its SHA-256 is in `Repr-Digest` (and the ETag), for a job that pins it. The file is read
 * once, at the first request (a build replaces it only with a restart of the service).
 */
import { createHash } from 'node:crypto'
import fsp from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { DropcodeError } from '../core/errors.js'

/** dist/cli/dropcode.mjs, from src/routes (tests, dev) and from dist/routes (the build) alike. */
export const CLI_BUNDLE = fileURLToPath(new URL('../../dist/cli/dropcode.mjs', import.meta.url))

interface Bundle { body: Buffer, sha256: Buffer }

const cliRoutes: FastifyPluginAsyncTypebox = async (app) => {
  let loaded: Promise<Bundle> | undefined
  const load = async (): Promise<Bundle> => {
    const body = await fsp.readFile(CLI_BUNDLE)
    return { body, sha256: createHash('sha256').update(body).digest() }
  }

  app.route({
    method: ['GET', 'HEAD'],
    url: '/cli/dropcode.mjs',
    schema: {
      summary: 'The CLI as one file, for `node dropcode.mjs …` (Node 20 or later, no dependencies)',
      tags: ['cli'],
      documentedResponses: { 200: { description: 'The CLI (JavaScript module); Repr-Digest carries its SHA-256.', content: { 'text/javascript': { schema: { type: 'string' } } } } }
    },
    handler: async (req, reply) => {
      loaded ??= load()
      let bundle: Bundle
      try {
        bundle = await loaded
      } catch (err) {
        loaded = undefined // built later: read it then
        req.log.warn({ err }, 'the CLI bundle is missing: run npm run build')
        throw new DropcodeError('DROPCODE_ROUTE_NOT_FOUND', 'The CLI file is not built on this server (npm run build).')
      }
      const etag = `"${bundle.sha256.toString('base64url')}"`
      reply.headers({
        'content-type': 'text/javascript; charset=utf-8',
        'repr-digest': `sha-256=:${bundle.sha256.toString('base64')}:`,
        etag,
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff'
      })
      if (req.headers['if-none-match'] === etag) return reply.code(304).send()
      return bundle.body
    }
  })
}
export default cliRoutes
