/** docker-compose.yml cannot run here (no engine), so its shape is checked against the code. */
import fs from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import { EnvSchema, loadConfig } from '../src/config.js'

// `merge`: the balanced profile's instances share one definition through YAML merge keys (`<<`), as Compose reads them.
const compose = parse(fs.readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8'), { merge: true }) as {
  services: Record<string, { environment?: Record<string, string> | string[], ports?: string[], expose?: Array<string | number>, build?: unknown, image?: string, volumes?: string[], stop_grace_period?: string, profiles?: string[], depends_on?: unknown }>
}

t.test('the stack has the service, Redis, MinIO and the bucket setup', async t => {
  const always = Object.entries(compose.services).filter(([, s]) => s.profiles === undefined).map(([name]) => name)
  t.same(always.sort(), ['dropcode', 'minio', 'minio-setup', 'redis'])
  t.ok(compose.services.dropcode!.build, 'dropcode is built from the Dockerfile')
  t.ok(fs.existsSync(new URL('../Dockerfile', import.meta.url)))
  t.ok((compose.services['minio-setup']!.volumes ?? []).some(v => v.startsWith('./minio:')), 'bucket setup mounts minio/')
  t.ok(fs.existsSync(new URL('../minio/setup.sh', import.meta.url)))
})

/** A dropcode service's environment as a map. */
function serviceEnv (name = 'dropcode'): Record<string, string> {
  const raw = compose.services[name]!.environment!
  return Array.isArray(raw)
    ? Object.fromEntries(raw.map(kv => kv.split(/=(.*)/s).slice(0, 2) as [string, string]))
    : raw
}

t.test('the service environment uses only real settings, and they load', async t => {
  const env = serviceEnv()
  for (const name of Object.keys(env)) t.ok(name in EnvSchema.properties, `${name} is a dropcode setting`)
  const resolved = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v).replace(/\$\{(\w+):-([^}]*)\}/g, '$2')]))
  const config = loadConfig(resolved)
  const stopGraceMs = Number(/^(\d+)s$/.exec(compose.services.dropcode!.stop_grace_period ?? '')?.[1] ?? 10) * 1000
  t.ok(stopGraceMs > config.drainDelayMs + config.shutdownGraceMs, `stop_grace_period (${stopGraceMs} ms) outlasts the drain delay and the shutdown grace`)
  t.equal(config.storage.driver, 's3')
  t.equal(config.state.driver, 'redis')
  t.match(compose.services.dropcode!.ports, [/3000/])
  t.same(compose.services.redis!.ports ?? [], [], 'Redis is not published: a host port would collide with the Redis a developer already runs on 6379')
})

t.test('metrics: on the compose network for a scraper, never published on the host (metrics_oracle)', async t => {
  const config = loadConfig(serviceEnv())
  t.same(config.metrics, { host: '0.0.0.0', port: 9464 }, 'listening on the container network')
  t.same((compose.services.dropcode!.expose ?? []).map(String), ['9464'], 'exposed to the compose network')
  for (const [name, service] of Object.entries(compose.services)) {
    for (const mapping of service.ports ?? []) t.notMatch(String(mapping), /(^|:)9464$/, `${name}: ${mapping} does not publish the metrics port`)
  }
  const dockerfile = fs.readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8')
  t.match(dockerfile, /^EXPOSE 3000 9464$/m)
  t.match(dockerfile, /^\s+METRICS_HOST=0\.0\.0\.0 \\$/m, 'the image listens for the scraper on its network')
})

t.test('the Dockerfile runs as a non-root user', async t => {
  const dockerfile = fs.readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8')
  t.match(dockerfile, /^USER node$/m)
  t.match(dockerfile, /AS build/)
})

t.test('the balanced profile: two instances behind the repo\'s nginx and HAProxy recipes, only the balancers published', async t => {
  const balanced = Object.entries(compose.services).filter(([, s]) => s.profiles?.includes('balanced')).map(([name]) => name)
  t.same(balanced.sort(), ['dropcode-1', 'dropcode-2', 'haproxy', 'nginx'])
  for (const name of ['dropcode-1', 'dropcode-2']) {
    const service = compose.services[name]!
    const config = loadConfig(Object.fromEntries(Object.entries(serviceEnv(name)).map(([k, v]) => [k, String(v).replace(/\$\{(\w+):-([^}]*)\}/g, '$2')])))
    t.equal(config.trustProxy, 1, `${name} trusts the one balancer hop`)
    t.same(service.ports ?? [], [], `${name} publishes no port: the balancers are the only way in, so TRUST_PROXY=1 is safe`)
    t.same((service.expose ?? []).map(String).sort(), ['3000', '9464'])
    // The recipes name the instances dropcode-1:3000 and dropcode-2:3000 (test/helpers/balancers.ts replaces them).
    for (const file of ['deploy/nginx.conf', 'deploy/haproxy.cfg']) t.match(fs.readFileSync(new URL(`../${file}`, import.meta.url), 'utf8'), `${name}:3000`)
  }
  t.match(compose.services.nginx!.volumes, ['./deploy/nginx.conf:/etc/nginx/nginx.conf:ro'])
  t.match(compose.services.haproxy!.volumes, ['./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro'])
  for (const name of ['nginx', 'haproxy']) for (const mapping of compose.services[name]!.ports ?? []) t.match(mapping, /^127\.0\.0\.1:/, `${name} is published on 127.0.0.1 only`)
})
