// Builds the web page into dist/web (part of `npm run build`): web/src (TypeScript, browser ES
// modules, no bundler: a handful of small files) compiles to dist/web/assets, src/api (what the
// page shares with the server and the CLI: the retry policy, the API's answers) to
// dist/web/assets/api, and web/static (index.html, the stylesheet, the icon) is copied beside
// them. The page's sources import the shared modules by their real path (../../src/api/x.js),
// which the compiled modules name by their served one (./api/x.js). Each file also gets a brotli and
// a gzip copy, which @fastify/static serves to browsers that accept them (preCompressed), so
// nothing is compressed per request. dist/ is what the image ships.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'

const root = fileURLToPath(new URL('..', import.meta.url))
const final = fileURLToPath(new URL('../dist/web', import.meta.url))
// Built beside the live directory and swapped in at the end: a server running from dist/ (a
// test, `npm run dev`) never sees the page half-built or missing.
const out = `${final}.next`
rmSync(out, { recursive: true, force: true })
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const compiled = `${out}.tsc`
rmSync(compiled, { recursive: true, force: true })
execFileSync(process.execPath, [tsc, '-p', 'web/tsconfig.json', '--outDir', compiled], { cwd: root, stdio: 'inherit' })
const assets = path.join(out, 'assets')
mkdirSync(out, { recursive: true })
renameSync(path.join(compiled, 'web', 'src'), assets)
renameSync(path.join(compiled, 'src', 'api'), path.join(assets, 'api'))
rmSync(compiled, { recursive: true, force: true })
const SHARED = /(from\s+|import\s*\(\s*)(['"])\.\.\/\.\.\/src\/api\//g
for (const name of readdirSync(assets)) {
  if (!name.endsWith('.js')) continue
  const file = path.join(assets, name)
  const text = readFileSync(file, 'utf8')
  const served = text.replace(SHARED, '$1$2./api/')
  if (served.includes('../src/')) throw new Error(`web/build.mjs: ${name} still imports ../src/ after the rewrite`)
  if (served !== text) writeFileSync(file, served)
}
cpSync(fileURLToPath(new URL('static', import.meta.url)), out, { recursive: true })
// The one library the page uses (the QR code of a code's link: web/src/qr.ts), as its own ES module.
const uqr = path.join(path.dirname(createRequire(import.meta.url).resolve('uqr')), 'index.mjs')
mkdirSync(path.join(assets, 'vendor'), { recursive: true })
cpSync(uqr, path.join(assets, 'vendor', 'uqr.js'))

for (const entry of readdirSync(out, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !/\.(html|js|css|svg)$/.test(entry.name)) continue
  const file = path.join(entry.parentPath, entry.name)
  const bytes = readFileSync(file)
  writeFileSync(`${file}.br`, brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }))
  writeFileSync(`${file}.gz`, gzipSync(bytes, { level: 9 }))
}

rmSync(`${final}.old`, { recursive: true, force: true })
try { renameSync(final, `${final}.old`) } catch { /* first build */ }
renameSync(out, final)
rmSync(`${final}.old`, { recursive: true, force: true })
