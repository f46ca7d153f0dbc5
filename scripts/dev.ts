// `npm run dev`: builds the web page, then runs the server from src/ (tsx). Node's --watch-path
// (package.json) restarts this whole script when anything under src/ or web/ changes, so a
// change to the page is rebuilt too (web/build.mjs swaps dist/web in whole), not only a
// change to the server.
await import('../web/build.mjs')
await import('../src/server.js')
