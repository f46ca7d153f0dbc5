/** The real curl as a child process, for tests that drive the service the way users do. */
import { spawn } from 'node:child_process'
import { once } from 'node:events'

/** curl's exit code, stdout and stderr (never throws on a failed transfer). */
export async function curl (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  const child = spawn('curl', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let [stdout, stderr] = ['', '']
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const [code] = await once(child, 'close') as [number]
  return { code, stdout, stderr }
}
