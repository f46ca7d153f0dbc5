/**
 * OpenAPI 3 document at GET /openapi.json, generated from the route schemas (@fastify/swagger).
 * Multipart request bodies cannot be fastify `body` schemas (@fastify/multipart streams them, so
 * there is no parsed body to validate); routes describe them in `schema.multipart` and the
 * transform below turns that into the document's multipart/form-data request body.
 */
import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { TSchema } from 'typebox'

export interface RouteEntry { method: string, url: string, hidden: boolean }

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered (for the OpenAPI completeness test and operators' tooling). */
    routeTable: RouteEntry[]
  }
  interface FastifySchema {
    /** Documents a multipart/form-data body (fields and file parts) for the OpenAPI document only. */
    multipart?: TSchema
    /** Responses documented but not serialized by fastify (binary and HTML bodies). */
    documentedResponses?: Record<string, unknown>
  }
}

export default fp(async function openapi (app: FastifyInstance) {
  const routeTable: RouteEntry[] = []
  app.decorate('routeTable', routeTable)
  app.addHook('onRoute', route => {
    for (const method of [route.method].flat()) routeTable.push({ method, url: route.url, hidden: route.schema?.hide === true })
  })
  await app.register(swagger, {
    exposeHeadRoutes: true,
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'dropcode',
        version: '1',
        description: 'File handoff: upload with an API key, get a 6-character code, download or delete by code.'
      },
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-Client-Key' } }
      }
    },
    transform ({ schema, url }) {
      if (schema === undefined) return { schema, url }
      const { multipart, documentedResponses, ...rest } = schema
      return {
        schema: {
          ...rest,
          ...(multipart !== undefined ? { consumes: ['multipart/form-data'], body: multipart } : {}),
          ...(documentedResponses !== undefined ? { response: { ...(rest.response as object), ...documentedResponses } } : {})
        },
        url
      }
    }
  })
  app.get('/openapi.json', { config: { alwaysAnswered: true }, schema: { hide: true } }, async () => app.swagger())
}, { name: 'openapi' })
