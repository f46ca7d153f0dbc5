/**
 * Run by tap before any test file (`before` in .taprc), for `npm test` and a targeted `npx tap
 * FILE` alike: the tests that start the server or the CLI as users run them start `dist/`, so a
 * run without a build would test stale code and could pass with a bug in `src/`. tsc builds
 * incrementally (dist/.tsbuildinfo): with nothing changed this takes a few seconds. Its output
 * goes to stderr (tap reads this process's stdout), and a failed build stops the run.
 */
import { spawnSync } from 'node:child_process'
import path from 'node:path'

const root = path.resolve(import.meta.dirname, '../..')

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
// Not under tap's coverage (@tapjs/processinfo follows child processes): the build is not what
// the tests cover.
const env = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
const built = spawnSync(npm, ['run', '--silent', 'build'], { cwd: root, env, stdio: ['ignore', 2, 2] })
if (built.status !== 0) {
  process.stderr.write(`test/helpers/build.ts: npm run build failed (${built.status ?? built.signal ?? 'no status'}); no test ran\n`)
  process.exit(1)
}
