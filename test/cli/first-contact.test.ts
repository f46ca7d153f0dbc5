/**
 * What a CI job sees of the CLI before any transfer (issue 24, "exit codes that never lie"): no
 * arguments is a usage error (exit 2, the usage on stderr, nothing on stdout), `--version` says
 * the version, and `https://` against a plain-HTTP service fails at once, in one line, instead
 * of retrying OpenSSL's text for 20 s. The real CLI binary against a real server process.
 */
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { dataDir } from '../helpers/tmp.js'
import { root, startServer } from '../helpers/server-process.js'
import { cliEnv, runCli } from './run.js'

const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }

t.test('no arguments: the usage on stderr, exit 2; --help: stdout, exit 0; --version', async t => {
  const env = cliEnv(t, 'http://127.0.0.1:9')
  const none = await runCli(t, [], env)
  t.equal(none.status, 2, 'a script that lost its arguments does not pass')
  t.equal(none.stdout, '')
  t.match(none.stderr, /^Usage: dropcode <command>/)
  const help = await runCli(t, ['--help'], env)
  t.equal(help.status, 0)
  t.match(help.stdout, /^Usage: dropcode <command>/)
  for (const flag of ['--version', '-V']) {
    const v = await runCli(t, [flag], env)
    t.equal(v.status, 0)
    t.equal(v.stdout, `dropcode ${version}\n`, flag)
  }
})

t.test('https:// against a plain-HTTP service: one line, exit 6, no retries', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k' })
  const tls = server.url.replace('http://', 'https://')
  for (const args of [['info', 'AbCdEf'], ['upload', '-'], ['download', 'AbCdEf']]) {
    const run = await runCli(t, args, cliEnv(t, tls, 'k'), 'x')
    t.equal(run.status, 6, `${args[0]}: exit 6`)
    // Retries would take 20 s (5 over the retry window); a process start on a loaded machine took 5 s once.
    t.ok(run.ms < 12_000, `${args[0]}: at once (${run.ms} ms), not after retries`)
    t.equal(run.stderr.trim().split('\n').length, 1, `${args[0]}: one line: ${run.stderr}`)
    t.match(run.stderr, `does not speak TLS (the TLS handshake was answered in plain HTTP): use ${server.url}`)
    t.notMatch(run.stderr, /ssl3_get_record|retrying/)
  }
})

t.test('a wrong --url is not a missing code: a path inside the service is exit 7 with the URL tried; a trailing // works', async t => {
  const server = await startServer(t, { DATA_DIR: dataDir(t), API_KEYS: 'k' })
  const inside = `${server.url}/dropcode`
  for (const args of [['info', 'AbCdEf'], ['download', 'AbCdEf'], ['upload', '-'], ['delete', 'AbCdEf']]) {
    const run = await runCli(t, args, cliEnv(t, inside, 'k'), 'x')
    t.equal(run.status, 7, `${args[0]}: exit 7, not 4 (${run.stderr.trim()})`)
    t.match(run.stderr, `${inside}/`)
    t.match(run.stderr, /is no endpoint of the dropcode service there \(404 DROPCODE_ROUTE_NOT_FOUND\): --url must be the service's root/)
  }
  const env = cliEnv(t, `${server.url}//`, 'k')
  const up = await runCli(t, ['upload', '-', '-q'], env, 'slashes')
  t.equal(up.status, 0, up.stderr)
  const info = await runCli(t, ['info', up.stdout.trim()], env)
  t.equal(info.status, 0, `a trailing // is the root: ${info.stderr}`)
  for (const args of [['upload', '-', '--json', '-q'], ['info', up.stdout.trim(), '--json']]) {
    const json = await runCli(t, args, env, 'json')
    t.equal(json.status, 0, json.stderr)
    t.match(json.stdout, /^\{.*\}\n$/, `${args[0]} --json: one line of JSON, ending with a newline`)
  }
  const gone = await runCli(t, ['info', 'AbCdEf'], env)
  t.equal(gone.status, 4, 'and a missing code is still exit 4')
  t.match(gone.stderr, /no file with code AbCdEf/)
})
