/**
 * The page's entry point: / is the upload view (upload-view.ts: key, file, settings, progress,
 * result) with the "received a code?" box; /d/{code} is a code's info page (info.ts).
 */
import { initCliBox } from './cli-box.js'
import { initCodeBox, showInfo } from './info.js'
import { UploadView } from './upload-view.js'

// The view follows the path.
const infoPath = /^\/d\/([^/]+)\/?$/.exec(location.pathname)
if (infoPath !== null) {
  let code = ''
  try {
    code = decodeURIComponent(infoPath[1]!)
  } catch { /* not a code */ }
  showInfo(code)
} else {
  // eslint-disable-next-line no-new -- the view wires itself to the page
  new UploadView()
  initCodeBox()
  initCliBox().catch(() => {}) // without the file (not built), the box stays hidden
}
