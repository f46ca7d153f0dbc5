/** TRUST_PROXY (config.ts) as proxy-addr's trust function, for fastify and the rate limits. */
import proxyAddr from '@fastify/proxy-addr'
import type { Config } from '../config.js'

/** TRUST_PROXY as proxy-addr's trust function: (address, hop index) → trusted. */
export function trustFunction (setting: Config['trustProxy']): (addr: string, i: number) => boolean {
  if (setting === false) return () => false
  if (typeof setting === 'number') return (_addr, i) => i < setting
  return proxyAddr.compile(setting)
}
