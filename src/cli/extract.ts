/**
 * `download --extract`: the archive is unpacked while it downloads, into a staging directory
 * beside its final place (same filesystem, so the move is a rename); once the download's digest
 * is verified, the tree is checked there on disk and moved into place only when every entry
 * passed. A refused or failed extraction (an unsafe entry, a bound, a gzip bomb, a full disk) or
 * a download that fails its check removes the staging directory and leaves the target as it was.
 *
 * - Target missing (`-o out`): staged as `PARENT/.out.NAME.dropcode-extract` (NAME: the
 *   archive's), renamed to `out`.
 * - Target an existing directory (the current one by default): staged inside it (as
 *   `.NAME.dropcode-extract`), then the
 *   archive's top-level entries (`dist/` for `dropcode upload dist/`) are moved into it. If any of
 *   them exists already, nothing is moved (exit 8): an extraction never writes into an existing
 *   tree, so a stale file can never survive beside verified ones. With --force, each existing
 *   one is replaced whole instead (moved aside, the extracted one moved in, the old one removed;
 *   everything moved back if a move fails), so the tree is exactly the archive's.
 *
 * The staging directory is named like the partial archive beside it: what a killed run left
 * there is removed by the next run for the same target and archive (which resumes the archive).
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { CliError, EXIT } from './exit-codes.js'
import { describe } from './http.js'
import { auditTree } from './tree-audit.js'
import { unpack, type UnpackLimits } from './unpack.js'

/** Shown in full up to this many; the rest counted. */
const SHOWN = 20

/** For `.catch`: a local write that failed is exit 8, naming `what`. */
export const cannotWrite = (what: string) => (err: unknown): never => { throw new CliError(EXIT.LOCAL, `cannot write ${what}: ${describe(err)}`) }

/**
 * Whether `target` is an existing directory (a link to one, the user's own choice, counts);
 * missing is fine, anything else is exit 8.
 */
export async function targetExists (target: string): Promise<boolean> {
  const st = await fs.stat(target).catch(() => undefined)
  if (st === undefined) return false
  if (!st.isDirectory()) throw new CliError(EXIT.LOCAL, `${target} exists and is not a directory: --extract needs a directory, or a path that does not exist yet`)
  return true
}

/** Where the archive is downloaded to (`.dropcode-part`) and unpacked (`.dropcode-extract`). */
export function besideTarget (target: string, exists: boolean, name: string, suffix: '.dropcode-part' | '.dropcode-extract'): string {
  return exists ? path.join(target, `.${name}${suffix}`) : path.join(path.dirname(target), `.${path.basename(target)}.${name}${suffix}`)
}

export function unsafeArchive (refused: string[]): CliError {
  const lines = refused.slice(0, SHOWN).map(r => `\n  ${r}`).join('')
  const more = refused.length > SHOWN ? `\n  (and ${refused.length - SHOWN} more)` : ''
  return new CliError(EXIT.LOCAL, `unsafe archive: refused ${refused.length} entr${refused.length === 1 ? 'y' : 'ies'}, nothing was extracted:${lines}${more}`)
}

/** Archive bytes buffered ahead of the unpacking, at most (then the download waits). */
const AHEAD = 4 * 1024 * 1024

export interface Extraction {
  /**
   * The archive's next bytes (not yet verified: they only reach the staging directory). Returns
   * a promise when the unpacking is behind (wait for it before writing more); throws what made
   * the extraction fail (a bound, a gzip bomb, a full disk).
   */
  write (data: Buffer): Promise<void> | undefined
  /** The archive is whole and verified: waits for the unpacking, checks the tree, moves it into place. */
  finish (): Promise<void>
  /** Drops what was unpacked (the download failed); the target stays as it was. */
  discard (): Promise<void>
  /** The download starts over from its first byte: drops what was unpacked and unpacks afresh. */
  restart (): Promise<void>
}

/**
 * Starts unpacking the archive `name` into a fresh staging directory for `target` (whose parent
 * the caller made; `exists`: from `targetExists`).
 */
export async function startExtraction (target: string, exists: boolean, name: string, limits: UnpackLimits, replace = false): Promise<Extraction> {
  const stage = besideTarget(target, exists, name, '.dropcode-extract')
  // Late writes of an aborted extraction fail once this is gone: node-tar creates nothing above
  // its (missing) working directory.
  const remove = async () => { await fs.rm(stage, { recursive: true, force: true, maxRetries: 3 }) }
  const begin = async () => {
    await remove() // a killed run's
    await fs.mkdir(stage).catch(cannotWrite(stage)) // the umask's mode, as for the directory it becomes
    const input = new PassThrough({ highWaterMark: AHEAD })
    const unpacked = unpack(input, stage, limits)
    const run = { input, unpacked, settled: false, failure: undefined as CliError | undefined, over: Promise.resolve() }
    run.over = unpacked.then(() => { run.settled = true }, (err: unknown) => {
      run.settled = true
      run.failure = err instanceof CliError ? err : new CliError(EXIT.LOCAL, `cannot extract the archive: ${describe(err)}`)
    })
    return run
  }
  let run = await begin()
  const discard = async () => {
    run.input.destroy(new Error('the extraction was discarded'))
    await run.over
    await remove()
  }
  return {
    write (data) {
      const { input, over } = run
      if (run.failure !== undefined) throw run.failure
      if (run.settled || input.write(data)) return undefined // (bytes after the archive's end are not its)
      return Promise.race([new Promise<void>(resolve => input.once('drain', resolve)), over]).then(() => {
        if (run.failure !== undefined) throw run.failure
      })
    },
    async finish () {
      try {
        run.input.end()
        await run.over
        if (run.failure !== undefined) throw run.failure
        const refused = await run.unpacked
        // On disk, whatever order the entries came in: chains of links, hard links to outside.
        if (refused.length === 0) refused.push(...await auditTree(stage, { hardlinks: true }))
        if (refused.length > 0) throw unsafeArchive(refused)
        if (exists) await moveEntries(stage, target, replace)
        else await fs.rename(stage, target).catch(cannotWrite(target))
      } finally {
        await remove()
      }
    },
    discard,
    async restart () {
      await discard()
      run = await begin()
    }
  }
}

/**
 * Moves every top-level entry of `stage` into `target`, or none if any name is taken there;
 * with `replace`, the taken ones are first moved aside (beside the stage) and removed once every
 * entry is in place.
 */
async function moveEntries (stage: string, target: string, replace: boolean): Promise<void> {
  const names = await fs.readdir(stage)
  const taken: string[] = []
  for (const name of names) if (await fs.lstat(path.join(target, name)).then(() => true, () => false)) taken.push(name)
  if (taken.length > 0 && !replace) {
    throw new CliError(EXIT.LOCAL, `${target} already has ${taken.slice(0, SHOWN).join(', ')}${taken.length > SHOWN ? ', …' : ''}: --extract never writes into an existing tree; pass --force to replace ${taken.length === 1 ? 'it' : 'them'} with the archive's, or extract elsewhere with -o`)
  }
  const aside = `${stage}.replaced`
  const setAside: string[] = []
  const moved: string[] = []
  try {
    if (taken.length > 0) {
      await fs.rm(aside, { recursive: true, force: true })
      await fs.mkdir(aside)
      for (const name of taken) {
        await fs.rename(path.join(target, name), path.join(aside, name))
        setAside.push(name)
      }
    }
    for (const name of names) {
      await moveNoReplace(path.join(stage, name), path.join(target, name))
      moved.push(name)
    }
  } catch (err) {
    for (const name of moved.reverse()) await moveNoReplace(path.join(target, name), path.join(stage, name)).catch(() => {})
    for (const name of setAside.reverse()) await fs.rename(path.join(aside, name), path.join(target, name)).catch(() => {})
    await fs.rm(aside, { recursive: true, force: true }).catch(() => {})
    throw new CliError(EXIT.LOCAL, `cannot move the extracted tree into ${target}: ${describe(err)}; nothing was changed`)
  }
  await fs.rm(aside, { recursive: true, force: true, maxRetries: 3 })
}

/**
 * A rename that never replaces what appeared meanwhile: a link(2) (which fails on an existing
 * name, and links a symbolic link itself) for anything but a directory; a directory's rename
 * fails on a non-empty one.
 */
async function moveNoReplace (from: string, to: string): Promise<void> {
  if ((await fs.lstat(from)).isDirectory()) return await fs.rename(from, to)
  await fs.link(from, to)
  await fs.unlink(from)
}
