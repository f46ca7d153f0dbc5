// `npm run dev`: builds the web page and runs the server from src/ (through tsx), and on any
// change under src/ or web/ stops it, rebuilds the page and starts it again. It watches itself
// (fs.watch, recursive) rather than with Node's --watch-path, which, given two paths, left a
// second watcher running inside the first.
import { spawn } from 'node:child_process'
import { watch } from 'node:fs'

const env = { LOG_FORMAT: 'pretty', DRAIN_DELAY_SECONDS: '0', ...process.env }
let server
let timer

function start () {
  // A separate process builds the page, so a broken page never takes the watcher down.
  const build = spawn(process.execPath, ['web/build.mjs'], { stdio: 'inherit' })
  build.once('exit', code => {
    if (code !== 0) { console.error('dev: the page did not build; fix it and save again'); return }
    server = spawn(process.execPath, ['--import=tsx', 'src/server.ts'], { stdio: 'inherit', env })
  })
}

function restart () {
  clearTimeout(timer)
  timer = setTimeout(() => {
    const running = server
    server = undefined
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return start()
    running.once('exit', start)
    running.kill('SIGTERM')
  }, 200) // one restart for a burst of saves
}

for (const dir of ['src', 'web']) watch(dir, { recursive: true }, restart)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    if (server !== undefined && server.exitCode === null) server.once('exit', () => process.exit(0)).kill(signal)
    else process.exit(0)
  })
}
start()
