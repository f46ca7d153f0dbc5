import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'

/**
 * A fresh temporary directory per call, removed when the test ends. (Not t.testdir(): that is
 * one directory per test, so two apps in one test, or two overlapping runs, would share it.)
 */
export function dataDir (t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dropcode-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}
