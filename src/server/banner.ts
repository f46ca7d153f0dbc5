/**
 * The start-up banner, printed on stderr whatever LOG_LEVEL is: where the service answers, where
 * its metrics are (their own listener), which drivers it uses, and the admin key kept under
 * DATA_DIR when API_KEYS is unset (without it nobody can upload).
 */
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import { describeRedis, type Config } from '../config.js'

const isEverywhere = (host: string) => host === '0.0.0.0' || host === '::'
const hostInUrl = (host: string) => host.includes(':') ? `[${host}]` : host

/** The metrics line: their URL (`metrics` is the address bound), or off. */
function metricsLine (config: Config, metrics: AddressInfo | undefined): string {
  if (config.metrics === false || metrics === undefined) return '  metrics: off (METRICS_PORT=off)'
  const { host } = config.metrics
  return isEverywhere(host)
    ? `  metrics: http://localhost:${metrics.port}/metrics (every network interface: METRICS_HOST=${host})`
    : `  metrics: http://${hostInUrl(host)}:${metrics.port}/metrics`
}

/** `kept`: the admin key kept under DATA_DIR when API_KEYS is unset (plugins/auth.ts). */
export function startupBanner (config: Config, address: string | AddressInfo | null, metrics?: AddressInfo, kept?: { secret: string, file: string, created: boolean }): string {
  const port = typeof address === 'object' && address !== null ? address.port : config.port
  const everywhere = isEverywhere(config.host)
  const urls = everywhere
    ? [`http://localhost:${port}/`, ...Object.values(os.networkInterfaces()).flat()
        .filter(i => i !== undefined && i.family === 'IPv4' && !i.internal).map(i => `http://${i!.address}:${port}/`)]
    : [`http://${hostInUrl(config.host)}:${port}/`]
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
    metricsLine(config, metrics),
    `  storage: ${storage}`,
    `  state:   ${state}`,
    kept !== undefined
      ? `  admin API key (${kept.created ? 'generated now and kept' : 'kept'} in ${kept.file}; make more with "dropcode keys create"): ${kept.secret}`
      : `  API keys: ${config.apiKeys.length} admin key${config.apiKeys.length === 1 ? '' : 's'} from API_KEYS, more in the key store ("dropcode keys")`
  ]
  return lines.join('\n') + '\n'
}
