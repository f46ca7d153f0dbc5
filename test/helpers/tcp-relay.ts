/**
 * A TCP relay on 127.0.0.1 in front of a server (the test's redis-server or S3), so a test can
 * break every connection through it at once (`cut`) while the server itself keeps running: what a
 * client sees when a network path drops; or stop every byte (`freeze`): what a stalled path does.
 */
import net from 'node:net'

export interface TcpRelay {
  port: number
  /** Destroys every connection open through the relay; new ones are accepted as before. */
  cut (): void
  /** From now on no byte moves either way, on open connections or new ones (they are accepted, then held). */
  freeze (): void
  close (): Promise<void>
}

export async function startTcpRelay (targetPort: number): Promise<TcpRelay> {
  const open = new Set<net.Socket>()
  let frozen = false
  const server = net.createServer(client => {
    if (frozen) {
      open.add(client)
      client.once('close', () => open.delete(client))
      client.on('error', () => {})
      client.pause()
      return
    }
    const upstream = net.connect(targetPort, '127.0.0.1')
    for (const s of [client, upstream]) {
      open.add(s)
      s.once('close', () => open.delete(s))
      s.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => client.destroy())
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => { for (const s of open) s.destroy() },
    freeze: () => {
      frozen = true
      for (const s of open) { s.unpipe(); s.pause() }
    },
    close: () => new Promise(resolve => {
      for (const s of open) s.destroy()
      server.close(() => resolve())
    })
  }
}
