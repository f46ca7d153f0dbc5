/**
 * Logger options: pino JSON, one line per request, and nothing secret in it. API keys are
 * redacted; download codes in URLs are cut to their first two characters, enough to correlate
 * a complaint without handing out the code to whoever reads the logs.
 */
import type { FastifyRequest } from 'fastify'

const CODE_IN_URL = /^(\/(?:download|delete)\/)([^/?#]{0,2})[^/?#]*/

export const maskUrl = (url: string) => url.replace(CODE_IN_URL, (_m, route: string, head: string) => `${route}${head}****`)

export function loggerOptions (level: string) {
  return {
    level,
    redact: { paths: ['req.headers["x-client-key"]', 'req.headers.authorization'], censor: '[redacted]' },
    serializers: {
      req (req: FastifyRequest) {
        return { method: req.method, url: maskUrl(req.url), remoteAddress: req.ip }
      }
    }
  }
}
