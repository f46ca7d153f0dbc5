/**
 * The peer on fs: the tus reference server for Node (@tus/server with @tus/file-store) storing in DIR,
 * its own process; prints `listening http://127.0.0.1:PORT` (uploads under /files/).
 * GET /files/ID answers the stored upload (@tus/server's own download handler).
 *   node --import=tsx bench/peers/tus.ts DIR
 */
import http from 'node:http'
import { FileStore } from '@tus/file-store'
import { Server } from '@tus/server'

const dir = process.argv[2]
if (dir === undefined) throw new Error('usage: tus.ts DIR')
const tus = new Server({ path: '/files', datastore: new FileStore({ directory: dir }) })
const server = http.createServer((req, res) => { tus.handle(req, res).catch(() => res.destroy()) })
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening http://127.0.0.1:${(server.address() as { port: number }).port}\n`))
