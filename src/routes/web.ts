/**
 * The web page for people (issue 13). GET / and GET /d/{code} answer the same HTML file (its
 * script picks the view from the path: upload, or a code's info page that only ever sends HEAD);
 * /assets/* serves its script modules, stylesheet and icon. All of it is built into dist/web by
 * `npm run build` (web/build.mjs), so the image, which ships dist/ only, serves it too.
 *
 * Every answer carries the page's Content-Security-Policy (http/page-security.ts). Assets are not
 * content-hashed, so they are revalidated (`no-cache` + ETag: a 304 costs a few bytes) rather than
 * cached for long, which would serve an old script after an upgrade.
 */
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { PAGE_CSP, PAGE_HEADERS } from '../http/page-security.js'
import { CodeParams } from './schemas.js'

/** dist/web, from src/routes (tests, dev) and from dist/routes (the build) alike. */
export const WEB_ROOT = fileURLToPath(new URL('../../dist/web/', import.meta.url))

const html = { 200: { description: 'The web page (HTML).', content: { 'text/html': { schema: { type: 'string' } } } } }

const webRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.addHook('onSend', async (_req, reply) => {
    reply.headers({ 'content-security-policy': PAGE_CSP, 'cache-control': 'no-cache', ...PAGE_HEADERS })
  })
  await app.register(fastifyStatic, {
    root: `${WEB_ROOT}assets`,
    prefix: '/assets/',
    cacheControl: false, // set above: no-cache
    preCompressed: true, // the build writes .br and .gz beside each file (web/build.mjs)
    index: false,
    list: false
  })

  app.get('/', {
    schema: { summary: 'The web page: upload a file, or enter a code', tags: ['web'], documentedResponses: html }
  }, async (_req, reply) => reply.sendFile('index.html', WEB_ROOT))

  app.get('/d/:code', {
    schema: {
      summary: 'A code\'s info page: name, size and SHA-256 (read with HEAD, so nothing is counted) and a download button',
      tags: ['web'],
      params: CodeParams,
      documentedResponses: html
    }
  }, async (_req, reply) => {
    // The page is the same for every code; X-Robots-Tag keeps links to it out of search engines.
    reply.header('x-robots-tag', 'noindex')
    return reply.sendFile('index.html', WEB_ROOT)
  })
}
export default webRoutes
