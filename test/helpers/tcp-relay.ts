/**
 * A TCP relay on 127.0.0.1 in front of a server (the test's redis-server), so a test can break
 * every connection through it at once (`cut`) while the server itself keeps running: what a
 * client sees when a network path drops.
 */
import net from 'node:net'

export interface TcpRelay {
  port: number
  /** Destroys every connection open through the relay; new ones are accepted as before. */
  cut (): void
  close (): Promise<void>
}

export async function startTcpRelay (targetPort: number): Promise<TcpRelay> {
  const open = new Set<net.Socket>()
  const server = net.createServer(client => {
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
    close: () => new Promise(resolve => {
      for (const s of open) s.destroy()
      server.close(() => resolve())
    })
  }
}
