/**
 * The layer rules of the README's Architecture section, checked on every import of src/ and
 * web/src/ (type-only imports too: an arrow is an arrow). Each room may import itself and the
 * rooms listed for it, nothing else; a file in no room fails, so a new folder is placed on
 * purpose.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'

const root = path.resolve(import.meta.dirname, '..')

/** Room → the rooms it may import, bottom to top. */
const MAY_IMPORT: Record<string, string[]> = {
  api: [],
  core: ['api'],
  config: ['api', 'core'],
  logging: ['api', 'core', 'config'],
  blob: ['api', 'core', 'config'],
  state: ['api', 'core', 'config'],
  metrics: ['api', 'core', 'blob'],
  services: ['api', 'core', 'config', 'blob', 'state', 'metrics'],
  http: ['api', 'core', 'config'],
  plugins: ['api', 'core', 'config', 'logging', 'metrics', 'blob', 'state', 'services', 'http'],
  routes: ['api', 'core', 'config', 'http', 'services', 'plugins'],
  server: ['api', 'core', 'config', 'logging', 'metrics', 'blob', 'state', 'services', 'http', 'plugins', 'routes'],
  cli: ['api', 'core'],
  web: ['api']
}

/** The room of a file (a path relative to the repository), or undefined. */
function roomOf (file: string): string | undefined {
  const parts = file.split('/')
  if (parts[0] === 'web' && parts[1] === 'src') return 'web'
  if (parts[0] !== 'src') return undefined
  if (parts.length > 2) return parts[1] === 'server' ? 'server' : parts[1]
  const top: Record<string, string> = { 'app.ts': 'server', 'server.ts': 'server', 'config.ts': 'config', 'logging.ts': 'logging', 'metrics.ts': 'metrics' }
  return top[parts[1]!]
}

function sources (dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter(f => f.endsWith('.ts')).map(f => `${dir}/${f}`)
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^'"]*?\bfrom\s*['"](\.[^'"]+)['"]|\bimport\s*\(?\s*['"](\.[^'"]+)['"]/g

/** Every relative import of a file, as repository paths (.js named as the .ts it compiles from). */
function importsOf (file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8')
  return [...text.matchAll(IMPORT)].map(m => path.posix.join(path.posix.dirname(file), (m[1] ?? m[2])!).replace(/\.js$/, '.ts'))
}

const files = [...sources('src'), ...sources('web/src')]

t.test('every source file is in a room', async t => {
  t.same(files.filter(f => roomOf(f) === undefined || MAY_IMPORT[roomOf(f)!] === undefined), [])
  t.ok(files.length > 100, `${files.length} files read`)
})

t.test('no import against the arrows', async t => {
  const wrong: string[] = []
  let arrows = 0
  for (const file of files) {
    const from = roomOf(file)!
    for (const target of importsOf(file)) {
      arrows++
      const to = roomOf(target)
      if (to === undefined || (to !== from && !MAY_IMPORT[from]!.includes(to))) wrong.push(`${file} (${from}) imports ${target} (${to ?? 'no room'})`)
    }
  }
  t.same(wrong, [], 'each room imports only itself and the rooms below it')
  t.ok(arrows > 250, `${arrows} imports read`)
})

t.test('the check sees a wrong arrow', async t => {
  t.equal(roomOf('src/core/ids.ts'), 'core')
  t.notOk(MAY_IMPORT.core!.includes(roomOf('src/services/files.ts')!), 'core may not import services')
  t.same(importsOf('web/src/api.ts').filter(f => f.startsWith('src/')), ['src/api/answers.ts', 'src/api/retry.ts'], 'the page imports the shared words by their path')
})
