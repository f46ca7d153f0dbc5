/**
 * Raw TCP clients for transfer-rate tests: a connection whose server side can be watched (a
 * server that cuts a reader which does not read cannot deliver its FIN, so only the server's side
 * shows the cut at once), and a reader that takes a set number of bytes a second.
 */
import net from 'node:net'
import type { FastifyInstance } from 'fastify'

const KiB = 1024

/** A raw connection to the app at `url`, and when the server's side of it closes (ms after `mark()`, or after connecting). */
export async function connect (app: FastifyInstance, url: string) {
  const { port } = new URL(url)
  let serverClosed!: Promise<number>
  let started = Date.now()
  const accepted = new Promise<void>(resolve => {
    const onConnection = (socket: net.Socket) => {
      if (socket.remotePort !== client.localPort) return
      app.server.off('connection', onConnection)
      serverClosed = new Promise(resolve => socket.once('close', () => resolve(Date.now() - started)))
      resolve()
    }
    app.server.on('connection', onConnection)
  })
  // A read buffer that holds a 50 ms tick of the fastest reader here (2 MiB/s), and little more.
  // (net.Socket passes stream options on to Duplex; @types/node does not list them.)
  const client = new net.Socket({ readableHighWaterMark: 256 * KiB } as net.SocketConstructorOpts)
  client.on('error', () => {})
  await new Promise<void>(resolve => client.connect(Number(port), '127.0.0.1', resolve))
  await accepted
  return {
    client,
    /** Starts the clock for `closed()`. */
    mark: () => { started = Date.now() },
    closed: () => serverClosed
  }
}

/** Reads `client` at `perSecond` bytes a second until it closes; the text of the first bytes and the count. */
export function readAtRate (client: net.Socket, perSecond: number): Promise<{ head: string, got: number }> {
  client.pause()
  const started = Date.now()
  let got = 0
  let head = ''
  const tick = setInterval(() => {
    let want = Math.floor(perSecond * (Date.now() - started) / 1000) - got
    while (want > 0) {
      const n = Math.min(want, client.readableLength)
      if (n === 0) { client.read(0); break }
      const chunk = client.read(n) as Buffer
      if (head.length < 2048) head += chunk.toString('latin1', 0, 2048)
      got += chunk.length
      want -= chunk.length
    }
  }, 50)
  return new Promise(resolve => client.once('close', () => { clearInterval(tick); resolve({ head, got }) }))
}
