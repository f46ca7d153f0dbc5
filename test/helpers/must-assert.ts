/**
 * Loaded into every test process before its file (`node-arg` in .taprc): a subtest that ends
 * with no assertion fails, so a test cannot pass by returning early (a settings check that does
 * not pick the driver it meant to test, a loop that never ran). Its parent reports
 * "NAME: ended without an assertion". Skipped subtests are not run and not checked here; a
 * file with no test at all is reported by tap as "no tests found", a skip, and `.ci/run` sets
 * TAP_FAIL_SKIP=1 (tap's --fail-skip): on CI, where every tool the tests need is installed,
 * every skip fails too.
 */
import t from 'tap'

t.afterEach(child => {
  if (child.counts.total === 0) throw new Error(`${child.name}: ended without an assertion`)
})
