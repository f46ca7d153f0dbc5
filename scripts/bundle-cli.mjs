// Bundles the CLI into one self-contained file, dist/cli/dropcode.mjs (part of `npm run build`),
// from the same sources as dist/cli: what the service serves at GET /cli/dropcode.mjs, so a CI
// job installs the client that matches its server with one curl and runs it with plain `node`
// (no npm, no node_modules, no engines check). Node 20 is its floor (runners still have it),
// though the server needs 22. Written beside the live file and renamed into place, so a
// running server never serves half a file.
import { chmodSync, readFileSync, renameSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const out = `${root}dist/cli/dropcode.mjs`
await build({
  entryPoints: [`${root}src/cli/index.ts`],
  outfile: `${out}.next`,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // The version is fixed at build time: the bundle has no package.json beside it.
  define: { __DROPCODE_VERSION__: JSON.stringify(version) },
  // Bundled CommonJS code may call require() for Node's own modules.
  // (The entry point's own shebang comes first.)
  banner: { js: "import { createRequire as __dropcodeRequire } from 'node:module'; const require = __dropcodeRequire(import.meta.url);" },
  legalComments: 'none',
  logLevel: 'warning'
})
renameSync(`${out}.next`, out)
chmodSync(out, 0o755)
