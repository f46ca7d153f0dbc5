#!/usr/bin/env node
/**
 * The `dropcode` command line: upload, download, info, delete, keys (see docs/cli.md). Results go to
 * stdout (the code alone, or JSON with --json); progress and messages to stderr; failures exit
 * with the codes in exit-codes.ts.
 */
import { parse, type Args, type KeysArgs } from './args.js'
import { download } from './download.js'
import { info, remove } from './lookup.js'
import { CliError, EXIT, type ExitCode } from './exit-codes.js'
import { Client, describe } from './http.js'
import { createKey, listKeys, revokeKey, rotateKey, rotatedNote } from './keys.js'
import { keysTable } from './keys-table.js'
import { MAX_SUGGESTED_PARALLEL, upload } from './upload.js'

const say = (args: { quiet: boolean }, message: string) => { if (!args.quiet) process.stderr.write(`${message}\n`) }

async function run (args: Exclude<Args, { command: 'help' }>): Promise<void> {
  const client = new Client({
    url: args.url,
    key: args.command === 'upload' || args.command === 'keys' ? args.key : undefined,
    retries: args.retries,
    sockets: args.command === 'upload' ? args.parallel ?? MAX_SUGGESTED_PARALLEL : 2,
    onRetry: (what, reason, ms) => say(args, `${what}: ${reason.replace(/\.$/, '')}; retrying in ${(ms / 1000).toFixed(1)} s`)
  })
  try {
    switch (args.command) {
      case 'upload': {
        const result = await upload(args, client)
        process.stdout.write(args.json ? `${JSON.stringify(result)}\n` : `${result.code}\n`)
        return
      }
      case 'download': {
        const result = await download(args, client)
        if (args.json) process.stdout.write(`${JSON.stringify(result)}\n`)
        if (result.path !== '-') say(args, `${args.extract ? 'extracted into' : 'saved'} ${result.path} (${result.size} bytes, SHA-256 verified)`)
        return
      }
      case 'info': {
        const result = await info(args, client)
        process.stdout.write(args.json
          ? `${JSON.stringify(result)}\n`
          : `name: ${result.name}\nsize: ${result.size}\ntype: ${result.content_type}\nsha256: ${result.sha256}\n`)
        return
      }
      case 'delete': {
        const message = await remove(args, client)
        if (args.json) process.stdout.write(`${JSON.stringify({ code: args.code, deleted: true, message })}\n`)
        say(args, message)
        return
      }
      case 'keys':
        await keys(args, client)
    }
  } finally {
    client.close()
  }
}

/** A secret goes alone on stdout (KEY=$(dropcode keys create …)); what it means, on stderr. */
async function keys (args: KeysArgs, client: Client): Promise<void> {
  const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`)
  switch (args.action) {
    case 'create': {
      const answer = await createKey(args, client)
      if (args.json) out(answer)
      else process.stdout.write(`${answer.secret}\n`)
      say(args, `created key ${answer.name}${answer.admin ? ' (admin)' : ''}; its secret is shown this once and cannot be shown again (rotate the key for a new one)`)
      return
    }
    case 'list': {
      const answer = await listKeys(args, client)
      process.stdout.write(args.json ? `${JSON.stringify(answer)}\n` : keysTable(answer.keys))
      return
    }
    case 'revoke': {
      const answer = await revokeKey(args, client)
      if (args.json) out(answer)
      say(args, `revoked key ${answer.name}: its secret is refused from now on`)
      return
    }
    case 'rotate': {
      const rotated = await rotateKey(args, client)
      if (args.json) out(rotated.answer)
      else process.stdout.write(`${rotated.answer.secret}\n`)
      // The note of a second rotation goes out even with -q: the secret in use may be dead.
      if (!args.quiet || rotated.repeated) process.stderr.write(`${rotatedNote(rotated)}\n`)
    }
  }
}

async function main (): Promise<ExitCode> {
  // A closed pipe on stdout (`dropcode download X -o - | head`) ends the run quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => { if (err.code === 'EPIPE') process.exit(EXIT.FAILURE) })
  try {
    const args = parse(process.argv.slice(2), process.env)
    if (args.command === 'help') {
      if (args.exitCode === 2) {
        process.stderr.write(args.text)
        return EXIT.USAGE
      }
      process.stdout.write(args.text)
      return EXIT.OK
    }
    await run(args)
    return EXIT.OK
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`dropcode: ${err.message}\n`)
      return err.exitCode
    }
    process.stderr.write(`dropcode: unexpected error: ${err instanceof Error ? err.stack ?? describe(err) : String(err)}\n`)
    return EXIT.FAILURE
  }
}

process.exitCode = await main()
