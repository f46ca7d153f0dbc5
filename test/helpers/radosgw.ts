// A real S3 endpoint for tests: a throw-away one-node Ceph cluster (one
// ceph-mon, one ceph-osd on the in-RAM `memstore` objectstore, one radosgw)
// bound to 127.0.0.1, everything kept in one fresh temp directory.
//
// Why: in-process fakes such as s3rver accept requests that real S3 rejects
// (EntityTooSmall for non-final multipart parts < 5 MiB, InvalidPart for a
// wrong part ETag, NoSuchUpload for an unknown UploadId, ...) and lack
// AbortMultipartUpload / ListParts / ListMultipartUploads / lifecycle rules.
// radosgw enforces those like AWS does, so tests against it show what the
// service really sends. Recipe and settings: /work/shared/FACTS.md
// ("A real S3 in tests: Ceph RADOS Gateway on a one-node cluster").
//
// Needs Debian's `ceph-mon ceph-osd radosgw` packages; guard tests with
// radosgwInstalled(). Startup takes about one to two seconds.

import { spawn, execFile } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { accessSync, appendFileSync, constants as fsConstants, closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3'

export interface Radosgw {
  /** http://127.0.0.1:PORT — use with forcePathStyle: true. */
  endpoint: string
  accessKeyId: string
  secretAccessKey: string
  region: string
  /** The temp directory holding conf, data, logs, sockets; removed by stop(). */
  dir: string
  /** SIGKILLs the daemons, waits for them to exit, removes `dir`. Idempotent. */
  stop(): Promise<void>
}

export interface StartRadosgwOptions {
  /** Sets rgw_lc_debug_interval: one lifecycle "day" lasts this many seconds. */
  lifecycleDebugIntervalSeconds?: number | undefined
  /** memstore_device_bytes: RAM the OSD may hold (default 1 GiB). */
  memstoreBytes?: number | undefined
  /** Overall start timeout in milliseconds (default 60 000). */
  startTimeoutMs?: number | undefined
}

const REQUIRED_BINARIES = ['radosgw', 'ceph-mon', 'ceph-osd', 'monmaptool'] as const
const HELPER_BINARIES = ['ceph', 'radosgw-admin'] as const
const REGION = 'us-east-1'
const COMMAND_TIMEOUT_MS = 30_000
/** How long a command whose output says it is done may take to exit before it is killed (ms). */
const DONE_GRACE_MS = 3000
const DEFAULT_START_TIMEOUT_MS = 60_000
const DEFAULT_MEMSTORE_BYTES = 1024 * 1024 * 1024
const DIR_PREFIX = 'dropcode-radosgw-'

function findBinary (name: string): string | undefined {
  const dirs = ['/usr/bin', ...(process.env.PATH ?? '').split(delimiter).filter((d) => d !== '')]
  for (const d of dirs) {
    const candidate = join(d, name)
    try {
      accessSync(candidate, fsConstants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** True when radosgw, ceph-mon, ceph-osd and monmaptool are installed (no shell spawned). */
export function radosgwInstalled (): boolean {
  return REQUIRED_BINARIES.every((b) => findBinary(b) !== undefined)
}

// ---------------------------------------------------------------------------
// Emergency cleanup: if the test process exits without calling stop(), kill
// the daemons synchronously and drop the directory. (A process killed by a
// signal runs no 'exit' handlers; the daemons are therefore also started under
// `setpriv --pdeathsig SIGKILL` when setpriv exists, so the kernel kills them
// when this process dies, however it dies. PR_SET_PDEATHSIG follows the
// spawning *thread*: start clusters from the main thread or a worker that
// outlives them.)

interface LiveCluster { children: ChildProcess[], dir: string }
const live = new Set<LiveCluster>()
let exitHandlerInstalled = false

function installExitHandler (): void {
  if (exitHandlerInstalled) return
  exitHandlerInstalled = true
  process.on('exit', () => {
    for (const cluster of live) {
      for (const child of cluster.children) {
        if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
          try { process.kill(child.pid, 'SIGKILL') } catch { /* already gone */ }
        }
      }
      try { rmSync(cluster.dir, { recursive: true, force: true }) } catch { /* best effort */ }
    }
    live.clear()
  })
}

function processAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

// A test process killed by a signal leaves its directory behind (~40 MiB of
// mon store). Each directory records its owner's PID (`owner`) and its
// daemons' PIDs (`pids`); on start, remove directories whose owner is gone,
// first killing any daemon still running with that directory's CEPH_CONF.
async function sweepStale (): Promise<void> {
  let names: string[]
  try { names = await readdir(tmpdir()) } catch { return }
  for (const name of names) {
    if (!name.startsWith(DIR_PREFIX)) continue
    const dir = join(tmpdir(), name)
    let owner: number
    try { owner = Number.parseInt(await readFile(join(dir, 'owner'), 'utf8'), 10) } catch { continue }
    if (!Number.isInteger(owner) || owner <= 0 || processAlive(owner)) continue
    let pids: number[] = []
    try {
      pids = (await readFile(join(dir, 'pids'), 'utf8')).split('\n').map((l) => Number.parseInt(l, 10)).filter((n) => n > 0)
    } catch { /* none recorded */ }
    for (const pid of pids) {
      try {
        const environ = await readFile(`/proc/${pid}/environ`, 'utf8')
        if (environ.split('\0').includes(`CEPH_CONF=${join(dir, 'ceph.conf')}`)) process.kill(pid, 'SIGKILL')
      } catch { /* gone, or not ours */ }
    }
    await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch(() => {})
  }
}

// ---------------------------------------------------------------------------

async function freePort (): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address()
      if (address === null || typeof address === 'string') {
        server.close()
        reject(new Error('could not read a free port'))
        return
      }
      const { port } = address
      server.close((err) => { if (err !== undefined) reject(err); else resolve(port) })
    })
  })
}

function tailOf (file: string, lines = 40): string {
  try {
    const text = readFileSync(file, 'utf8')
    const all = text.split('\n')
    return all.slice(Math.max(0, all.length - lines - 1)).join('\n')
  } catch {
    return '(no file)'
  }
}

async function logTails (dir: string): Promise<string> {
  const logDir = join(dir, 'log')
  let names: string[] = []
  try { names = (await readdir(logDir)).sort() } catch { return '(no log directory)' }
  return names.map((n) => `--- ${join(logDir, n)} (tail) ---\n${tailOf(join(logDir, n))}`).join('\n')
}

function cephConf (dir: string, o: {
  fsid: string
  monPort: number
  rgwPort: number
  memstoreBytes: number
  lifecycleDebugIntervalSeconds?: number | undefined
}): string {
  const lines = [
    '[global]',
    `fsid = ${o.fsid}`,
    `mon_host = v2:127.0.0.1:${o.monPort}`,
    'mon_initial_members = a',
    'public_addr = 127.0.0.1',
    'cluster_addr = 127.0.0.1',
    'ms_bind_msgr1 = false',
    'ms_bind_msgr2 = true',
    'ms_mon_client_mode = crc',
    'auth_cluster_required = none',
    'auth_service_required = none',
    'auth_client_required = none',
    `keyring = ${dir}/keyring`,
    // Everything inside the directory.
    `run_dir = ${dir}/run`,
    `admin_socket = ${dir}/run/$cluster-$name.asok`,
    `pid_file = ${dir}/run/$cluster-$name.pid`,
    `log_file = ${dir}/log/$cluster-$name.log`,
    `mon_cluster_log_file = ${dir}/log/$cluster-cluster.log`,
    `crash_dir = ${dir}/crash`,
    `mon_data = ${dir}/mon/$cluster-$id`,
    `osd_data = ${dir}/osd/$cluster-$id`,
    `rgw_data = ${dir}/rgw/$cluster-$id`,
    // Quiet, small logs.
    'log_to_file = true',
    'log_to_stderr = false',
    'err_to_stderr = false',
    'log_to_syslog = false',
    'mon_cluster_log_to_syslog = false',
    'log_max_recent = 500',
    'debug_ms = 0/0',
    'debug_mon = 0/0',
    'debug_paxos = 0/0',
    'debug_osd = 0/0',
    'debug_filestore = 0/0',
    'debug_bluestore = 0/0',
    'debug_rocksdb = 0/0',
    'debug_monc = 0/0',
    'debug_auth = 0/0',
    'debug_objecter = 0/0',
    'debug_rados = 0/0',
    'debug_rgw = 0/0',
    'debug_civetweb = 0/0',
    'debug_asok = 0/0',
    'debug_crush = 0/0',
    // One node, one copy.
    'osd_pool_default_size = 1',
    'osd_pool_default_min_size = 1',
    'mon_allow_pool_size_one = true',
    'mon_warn_on_pool_no_redundancy = false',
    'osd_crush_chooseleaf_type = 0',
    'osd_pool_default_pg_num = 8',
    'osd_pool_default_pgp_num = 8',
    'mon_max_pg_per_osd = 1000',
    // Fast cold start (13 s -> ~1 s).
    'paxos_propose_interval = 0.05',
    'paxos_min_wait = 0.01',
    // A client whose op maps to a PG of a just-created pool (no OSD yet) asks
    // for a newer osdmap only on its next objecter tick (default 5 s): that
    // stalled radosgw-admin for ~5 s in about one start in ten.
    'objecter_tick_interval = 0.5',
    // Don't stop the mon on a fullish disk.
    'mon_data_avail_warn = 2',
    'mon_data_avail_crit = 1',
    // RAM-backed OSD.
    'osd_objectstore = memstore',
    `memstore_device_bytes = ${o.memstoreBytes}`,
    // Free deleted data in seconds, not hours.
    'rgw_gc_obj_min_wait = 10',
    'rgw_gc_processor_period = 10'
  ]
  if (o.lifecycleDebugIntervalSeconds !== undefined) {
    lines.push(`rgw_lc_debug_interval = ${o.lifecycleDebugIntervalSeconds}`)
  }
  lines.push(
    '',
    '[client.rgw.a]',
    `rgw_frontends = beast endpoint=127.0.0.1:${o.rgwPort}`,
    ''
  )
  return lines.join('\n')
}

/**
 * Starts a fresh one-node Ceph cluster with a radosgw S3 endpoint on 127.0.0.1. A start that
 * fails early is tried again on new ports (up to three tries within the start timeout): the
 * free ports are read before the daemons bind them, and a test file running beside this one may
 * take one meanwhile (a CI run once lost a whole test file to a start that failed in 3 s).
 */
export async function startRadosgw (opts: StartRadosgwOptions = {}): Promise<Radosgw> {
  const deadline = Date.now() + (opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS)
  const failures: string[] = []
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRadosgwOnce({ ...opts, startTimeoutMs: deadline - Date.now() })
    } catch (err) {
      failures.push(`try ${attempt}: ${err instanceof Error ? err.message : String(err)}`)
      if (attempt === 3 || deadline - Date.now() < 20_000 || (err instanceof Error && err.message.startsWith('startRadosgw:'))) {
        throw new Error(failures.join('\n'), { cause: err })
      }
    }
  }
}

async function startRadosgwOnce (opts: StartRadosgwOptions): Promise<Radosgw> {
  const bins: Record<string, string> = {}
  for (const b of [...REQUIRED_BINARIES, ...HELPER_BINARIES]) {
    const found = findBinary(b)
    if (found === undefined) {
      throw new Error(`startRadosgw: ${b} not found (apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw)`)
    }
    bins[b] = found
  }
  const bin = (name: string): string => {
    const p = bins[name]
    if (p === undefined) throw new Error(`startRadosgw: no binary ${name}`)
    return p
  }
  const setpriv = findBinary('setpriv')

  const started = Date.now()
  const timeoutMs = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
  const deadline = started + timeoutMs
  await sweepStale()
  const dir = await mkdtemp(join(tmpdir(), DIR_PREFIX))
  writeFileSync(join(dir, 'owner'), `${process.pid}\n`)
  const cluster: LiveCluster = { children: [], dir }
  installExitHandler()
  live.add(cluster)

  const env: NodeJS.ProcessEnv = { ...process.env, CEPH_CONF: join(dir, 'ceph.conf') }
  delete env.CEPH_ARGS

  let stopped: Promise<void> | undefined
  const stop = async (): Promise<void> => {
    stopped ??= (async () => {
      const exits = cluster.children.map(async (child) => {
        if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
        try { child.kill('SIGKILL') } catch { /* already gone */ }
        await exited
      })
      await Promise.all(exits)
      live.delete(cluster)
      await rm(dir, { recursive: true, force: true, maxRetries: 3 })
    })()
    await stopped
  }

  const remaining = (): number => deadline - Date.now()

  /**
   * Runs a command to its end. `done`: when its output says the work is done, a command that
   * does not exit within DONE_GRACE_MS after is killed and counts as done (radosgw-admin printed
   * the user it created, then hung for 30 s, once in a CI run on a loaded machine).
   */
  const run = async (file: string, args: string[], done?: (stdout: string) => boolean): Promise<string> => {
    const ms = Math.max(1, Math.min(COMMAND_TIMEOUT_MS, remaining()))
    return await new Promise<string>((resolve, reject) => {
      let finished = false
      let grace: NodeJS.Timeout | undefined
      const child = execFile(file, args, { env, cwd: dir, timeout: ms, killSignal: 'SIGKILL', maxBuffer: 4 * 1024 * 1024, encoding: 'utf8' },
        (err, stdout, stderr) => {
          clearTimeout(grace)
          if (err !== null && finished) {
            resolve(stdout)
          } else if (err !== null) {
            const why = err.killed ? `timed out after ${ms} ms` : `failed (${err.message.split('\n')[0] ?? ''})`
            reject(new Error(`${file} ${args.join(' ')} ${why}\nstdout: ${stdout}\nstderr: ${stderr}`))
          } else {
            resolve(stdout)
          }
        })
      if (done === undefined) return
      let seen = ''
      child.stdout?.on('data', (text: string) => {
        seen += text
        if (finished || !done(seen)) return
        finished = true
        grace = setTimeout(() => child.kill('SIGKILL'), DONE_GRACE_MS)
      })
    })
  }

  const daemon = (name: string, file: string, args: string[]): ChildProcess => {
    const outFile = join(dir, 'log', `${name}.stdout`)
    const fd = openSync(outFile, 'a')
    try {
      const [cmd, cmdArgs] = setpriv !== undefined
        ? [setpriv, ['--pdeathsig', 'SIGKILL', '--', file, ...args]]
        : [file, args]
      const child = spawn(cmd, cmdArgs, { env, cwd: dir, stdio: ['ignore', fd, fd] })
      child.on('error', () => { /* reported through exitCode / the poll */ })
      cluster.children.push(child)
      if (child.pid !== undefined) appendFileSync(join(dir, 'pids'), `${child.pid}\n`)
      return child
    } finally {
      closeSync(fd)
    }
  }

  const fail = async (cause: unknown): Promise<never> => {
    const tails = await logTails(dir)
    await stop()
    const msg = cause instanceof Error ? cause.message : String(cause)
    throw new Error(`startRadosgw failed after ${Date.now() - started} ms: ${msg}\n${tails}`, { cause })
  }

  const checkAlive = (): void => {
    for (const child of cluster.children) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`daemon ${child.spawnargs.join(' ')} exited early (code ${String(child.exitCode)}, signal ${String(child.signalCode)})`)
      }
    }
  }

  const accessKeyId = randomBytes(10).toString('hex').toUpperCase()
  const secretAccessKey = randomBytes(20).toString('hex')
  let client: S3Client | undefined
  let endpoint = ''

  try {
    const [monPort, rgwPort] = await Promise.all([freePort(), freePort()])
    if (monPort === rgwPort) throw new Error('got the same free port twice')
    endpoint = `http://127.0.0.1:${rgwPort}`
    const fsid = randomUUID()
    const osdUuid = randomUUID()
    for (const sub of ['run', 'log', 'crash', 'mon', 'osd', 'rgw/ceph-rgw.a']) {
      await mkdir(join(dir, sub), { recursive: true })
    }
    await writeFile(join(dir, 'ceph.conf'), cephConf(dir, {
      fsid,
      monPort,
      rgwPort,
      memstoreBytes: opts.memstoreBytes ?? DEFAULT_MEMSTORE_BYTES,
      lifecycleDebugIntervalSeconds: opts.lifecycleDebugIntervalSeconds
    }))

    const monmap = join(dir, 'monmap')
    await run(bin('monmaptool'), ['--create', '--fsid', fsid, '--addv', 'a', `[v2:127.0.0.1:${monPort}]`, monmap])
    await run(bin('ceph-mon'), ['--mkfs', '-i', 'a', '--monmap', monmap])
    daemon('mon.a', bin('ceph-mon'), ['-f', '-i', 'a'])

    const osdId = (await run(bin('ceph'), ['--connect-timeout', '20', 'osd', 'new', osdUuid])).trim()
    if (!/^\d+$/.test(osdId)) throw new Error(`ceph osd new printed ${JSON.stringify(osdId)}`)
    await mkdir(join(dir, 'osd', `ceph-${osdId}`), { recursive: true })
    await run(bin('ceph-osd'), ['-i', osdId, '--mkfs', '--osd-uuid', osdUuid])
    daemon(`osd.${osdId}`, bin('ceph-osd'), ['-f', '-i', osdId])

    await run(bin('radosgw-admin'), ['-n', 'client.admin', 'user', 'create', '--uid=test', '--display-name=test',
      `--access-key=${accessKeyId}`, `--secret-key=${secretAccessKey}`], out => out.includes(secretAccessKey) && out.trimEnd().endsWith('}'))

    daemon('client.rgw.a', bin('radosgw'), ['-f', '-n', 'client.rgw.a'])
    checkAlive()

    client = new S3Client({
      endpoint,
      region: REGION,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 1
    })
    let last: unknown
    for (;;) {
      checkAlive()
      if (remaining() <= 0) {
        const detail = last instanceof Error ? `${last.name}: ${last.message}` : String(last)
        throw new Error(`radosgw did not answer ListBuckets within ${timeoutMs} ms (last: ${detail})`)
      }
      try {
        const out = await client.send(new ListBucketsCommand({}), { abortSignal: AbortSignal.timeout(Math.max(1, Math.min(5000, remaining()))) })
        if (out.$metadata.httpStatusCode === 200) break
        last = new Error(`status ${String(out.$metadata.httpStatusCode)}`)
      } catch (err) {
        last = err
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } catch (err) {
    client?.destroy()
    return await fail(err)
  }
  client.destroy()

  return {
    endpoint,
    accessKeyId,
    secretAccessKey,
    region: REGION,
    dir,
    stop
  }
}
