/**
 * The documentation holds together: the README is the front door (its first screen, a contents
 * list, the short API and CLI summaries and the security model; the reference lives in docs/),
 * and every relative link of the README and of docs/ leads to a file that exists and, where it
 * names one, to a heading (GitHub's anchor) that exists in it. Moving a section breaks no link
 * silently.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { root } from './helpers/server-process.js'

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
function anchorsOf (text: string): Set<string> {
  const out = new Set<string>()
  let fence = false
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fence = !fence
    const m = fence ? null : /^#{1,6} (.*)$/.exec(line)
    if (m === null) continue
    const base = m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    let anchor = base
    for (let n = 1; out.has(anchor); n++) anchor = `${base}-${n}`
    out.add(anchor)
  }
  return out
}

const pages = ['README.md', 'bench/README.md', 'minio/README.md', ...fs.readdirSync(path.join(root, 'docs')).filter(f => f.endsWith('.md')).map(f => `docs/${f}`)]

t.test('every relative link leads to an existing file and heading', async t => {
  let links = 0
  for (const page of pages) {
    const text = fs.readFileSync(path.join(root, page), 'utf8')
    let fence = false
    for (const line of text.split('\n')) {
      if (line.startsWith('```')) fence = !fence
      if (fence) continue
      for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:)/.test(target!)) continue
        links++
        const [file, anchor] = target!.split('#') as [string, string | undefined]
        const dest = file === '' ? page : path.normalize(path.join(path.dirname(page), file))
        if (!fs.existsSync(path.join(root, dest))) { t.fail(`${page}: ${target} (no file ${dest})`); continue }
        if (anchor !== undefined && dest.endsWith('.md') && !anchorsOf(fs.readFileSync(path.join(root, dest), 'utf8')).has(anchor)) t.fail(`${page}: ${target} (no heading #${anchor} in ${dest})`)
      }
    }
  }
  t.ok(links > 100, `${links} links checked`)
})

t.test('the README is the front door: first screen, contents, summaries, security; the reference in docs/', async t => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const firstScreen = readme.split('\n').slice(0, 12).join('\n')
  t.match(firstScreen, 'npm ci && npm start', 'the command that runs the service')
  t.match(firstScreen, 'npm ci && npm test', 'the command that runs the tests')
  const sections = [...readme.matchAll(/^## (.*)$/gm)].map(m => m[1])
  t.same(sections, ['Contents', 'Using it', 'The web page', 'CLI', 'Using an existing tus client', 'API', 'Security and abuse'])
  for (const page of ['api', 'errors', 'configuration', 'architecture', 'scaling', 'operations', 'load-balancers', 'crashes', 'tests', 'performance', 'cli', 'web']) {
    t.match(readme, `(docs/${page}.md)`, `the contents link docs/${page}.md`)
  }
  t.ok(readme.split('\n').length < 500, `short enough to read in a few minutes (${readme.split('\n').length} lines)`)
})
