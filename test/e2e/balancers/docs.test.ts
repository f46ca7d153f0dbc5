/** docs/load-balancers.md shows the recipes exactly as the files that the balancer tests run. */
import fs from 'node:fs'
import t from 'tap'

const doc = fs.readFileSync(new URL('../../../docs/load-balancers.md', import.meta.url), 'utf8')
const blocks = [...doc.matchAll(/^```(nginx|haproxy)\n([\s\S]*?)^```$/gm)].map(m => [m[1], m[2]])

t.same(blocks.map(b => b[0]), ['nginx', 'haproxy'], 'one block per recipe')
for (const [lang, text] of blocks) {
  const file = lang === 'nginx' ? 'deploy/nginx.conf' : 'deploy/haproxy.cfg'
  t.equal(text, fs.readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8'), `the ${lang} block is ${file}`)
}
t.match(fs.readFileSync(new URL('../../../README.md', import.meta.url), 'utf8'), '(docs/load-balancers.md)', 'the README links the page')
