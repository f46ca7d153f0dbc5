// Builds the web page into dist/web (part of `npm run build`): web/src (TypeScript, browser ES
// modules, no bundler: a handful of small files) compiles to dist/web/assets, and web/static
// (index.html, the stylesheet, the icon) is copied beside it. Each file also gets a brotli and
// a gzip copy, which @fastify/static serves to browsers that accept them (preCompressed), so
// nothing is compressed per request. dist/ is what the image ships.
import { execFileSync } from 'node:child_process'
import { cpSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
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
execFileSync(process.execPath, [tsc, '-p', 'web/tsconfig.json', '--outDir', path.join(out, 'assets')], { cwd: root, stdio: 'inherit' })
cpSync(fileURLToPath(new URL('static', import.meta.url)), out, { recursive: true })

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
