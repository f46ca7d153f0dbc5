/** docker-compose.yml cannot run here (no engine), so its shape is checked against the code. */
import fs from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import { EnvSchema, loadConfig } from '../src/config.js'

const compose = parse(fs.readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8')) as {
  services: Record<string, { environment?: Record<string, string> | string[], ports?: string[], build?: unknown, image?: string, volumes?: string[], stop_grace_period?: string }>
}

t.test('the stack has the service, Redis, MinIO and the bucket setup', async t => {
  t.same(Object.keys(compose.services).sort(), ['dropcode', 'minio', 'minio-setup', 'redis'])
  t.ok(compose.services.dropcode!.build, 'dropcode is built from the Dockerfile')
  t.ok(fs.existsSync(new URL('../Dockerfile', import.meta.url)))
  t.ok((compose.services['minio-setup']!.volumes ?? []).some(v => v.startsWith('./minio:')), 'bucket setup mounts minio/')
  t.ok(fs.existsSync(new URL('../minio/setup.sh', import.meta.url)))
})

t.test('the service environment uses only real settings, and they load', async t => {
  const raw = compose.services.dropcode!.environment!
  const env: Record<string, string> = Array.isArray(raw)
    ? Object.fromEntries(raw.map(kv => kv.split(/=(.*)/s).slice(0, 2) as [string, string]))
    : raw
  for (const name of Object.keys(env)) t.ok(name in EnvSchema.properties, `${name} is a dropcode setting`)
  const resolved = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v).replace(/\$\{(\w+):-([^}]*)\}/g, '$2')]))
  const config = loadConfig(resolved)
  const stopGraceMs = Number(/^(\d+)s$/.exec(compose.services.dropcode!.stop_grace_period ?? '')?.[1] ?? 10) * 1000
  t.ok(stopGraceMs > config.drainDelayMs + config.shutdownGraceMs, `stop_grace_period (${stopGraceMs} ms) outlasts the drain delay and the shutdown grace`)
  t.equal(config.storage.driver, 's3')
  t.equal(config.state.driver, 'redis')
  t.match(compose.services.dropcode!.ports, [/3000/])
})

t.test('the Dockerfile runs as a non-root user', async t => {
  const dockerfile = fs.readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8')
  t.match(dockerfile, /^USER node$/m)
  t.match(dockerfile, /AS build/)
})
