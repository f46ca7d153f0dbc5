/**
 * A listen() failure as a StartupError naming the settings involved, for the service port
 * (HOST/PORT) and the metrics port (METRICS_HOST/METRICS_PORT) alike: server.ts prints it as
 * one line with its hint.
 */
import { StartupError } from '../core/errors.js'

export interface ListenTarget {
  host: string
  port: number
  /** The settings that chose host and port, named in the message. */
  hostSetting: 'HOST' | 'METRICS_HOST'
  portSetting: 'PORT' | 'METRICS_PORT'
  /** A port that needs no privileges, suggested when the port given does. */
  unprivileged: number
  /** Another way out, added to the hint when the port is taken (e.g. turning the listener off). */
  orElse?: string
}

export function listenError (err: NodeJS.ErrnoException, to: ListenTarget): StartupError {
  const where = `port ${to.port} on ${to.host}`
  const orElse = to.orElse !== undefined ? `, or ${to.orElse}` : ''
  if (err.code === 'EADDRINUSE') {
    return new StartupError(`${where} is already in use (${to.portSetting})`, `stop the other server there${orElse === '' ? ', or' : ','} choose another ${to.portSetting}${orElse}`)
  }
  if (err.code === 'EACCES') return new StartupError(`not allowed to listen on ${where} (${to.portSetting})`, `ports below 1024 need privileges: use ${to.portSetting}=${to.unprivileged}${to.portSetting === 'PORT' ? ' behind a proxy' : ''}`)
  if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') return new StartupError(`cannot listen on ${to.host} (${to.hostSetting}): ${err.code}`, 'use an address of this machine, 127.0.0.1 or 0.0.0.0')
  return new StartupError(`cannot listen on ${where}: ${err.code ?? err.message}`, `check ${to.hostSetting} and ${to.portSetting}`, { cause: err })
}
