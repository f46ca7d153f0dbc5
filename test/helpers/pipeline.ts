/**
 * Pipelined HTTP/1.1 on one raw socket: every request written at once, before any answer is
 * read, as a guesser would (fetch and node:http never pipeline). Only for bodiless answers
 * (HEAD), so that answers can be told apart by their status lines.
 */
import net from 'node:net'

/** Writes `paths` as pipelined `method` requests on one connection; resolves to the statuses, in order. */
export async function pipelined (url: string, method: 'HEAD', paths: string[], timeoutMs = 30_000): Promise<number[]> {
  const { hostname, port } = new URL(url)
  const socket = net.connect(Number(port), hostname)
  const statuses: number[] = []
  let text = ''
  return await new Promise<number[]>((resolve, reject) => {
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`${statuses.length} of ${paths.length} pipelined answers within ${timeoutMs} ms`)) }, timeoutMs)
    const done = (err?: Error) => {
      clearTimeout(timer)
      socket.destroy()
      if (err !== undefined) reject(err)
      else resolve(statuses)
    }
    socket.on('connect', () => {
      socket.write(paths.map(p => `${method} ${p} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`).join(''))
    })
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      text += chunk
      let end: number
      while ((end = text.indexOf('\r\n\r\n')) !== -1) {
        const head = text.slice(0, end)
        text = text.slice(end + 4)
        const status = /^HTTP\/1\.1 (\d{3})/.exec(head)
        if (status === null) return done(new Error(`not a status line: ${head.slice(0, 80)}`))
        statuses.push(Number(status[1]))
        if (statuses.length === paths.length) return done()
      }
    })
    socket.on('error', done)
    socket.on('close', () => done(new Error(`connection closed after ${statuses.length} of ${paths.length} answers`)))
  })
}
