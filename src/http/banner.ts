/**
 * The start-up banner, printed on stderr whatever LOG_LEVEL is: where the service answers, which
 * drivers it uses, and the API key when one was generated (without it nobody can upload).
 */
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import { describeRedis, type Config } from '../config.js'

export function startupBanner (config: Config, address: string | AddressInfo | null): string {
  const port = typeof address === 'object' && address !== null ? address.port : config.port
  const everywhere = config.host === '0.0.0.0' || config.host === '::'
  const urls = everywhere
    ? [`http://localhost:${port}/`, ...Object.values(os.networkInterfaces()).flat()
        .filter(i => i !== undefined && i.family === 'IPv4' && !i.internal).map(i => `http://${i!.address}:${port}/`)]
    : [`http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}/`]
  const storage = config.storage.driver === 's3'
    ? `S3 bucket ${config.storage.bucket}${config.storage.endpoint !== undefined ? ` at ${config.storage.endpoint}` : ''}${config.storage.prefix !== '' ? ` under ${config.storage.prefix}` : ''}`
    : `files under ${config.storage.dir}`
  const state = config.state.driver === 'redis'
    ? `${describeRedis(config.state.redis).where} (keys ${config.state.prefix}*)`
    : `LMDB under ${config.state.dir}`
  const lines = [
    everywhere
      ? `dropcode is serving on every network interface, port ${port} (HOST=${config.host}; HOST=127.0.0.1 serves this machine only):`
      : `dropcode is serving on ${config.host}, port ${port}:`,
    ...urls.map(u => `  ${u}`),
    `  storage: ${storage}`,
    `  state:   ${state}`,
    config.apiKeyGenerated
      ? `  API key (generated for this run; set API_KEYS to keep keys across restarts): ${config.apiKeys[0]!}`
      : `  API keys: ${config.apiKeys.length} from API_KEYS`
  ]
  return lines.join('\n') + '\n'
}
