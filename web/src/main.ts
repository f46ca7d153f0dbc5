/**
 * The page's entry point: / is the upload view (key, file, settings, progress, result) with the
 * "received a code?" box; /d/{code} is a code's info page (info.ts). Uploading itself is in
 * upload.ts (chunked.ts, context.ts); this file wires it to the DOM, with progress.ts and
 * result.ts.
 */
import { fetchLimits, type Limits } from './api.js'
import { $, setText, sleep } from './dom.js'
import { formatBytes, formatHours } from './format.js'
import { initCodeBox, showInfo } from './info.js'
import { ProgressText } from './progress.js'
import { initCopyButtons, showResult } from './result.js'
import { clearPending, forgetKey, isSameFile, loadKey, loadPending, saveKey, type Pending } from './store.js'
import { plan, tooLarge, UploadFailure, uploadFile } from './upload.js'

function initUpload (): void {
  $('upload-view').hidden = false
  const fileInput = $<HTMLInputElement>('file-input')
  const uploadForm = $<HTMLFormElement>('upload-form')
  const uploadButton = $<HTMLButtonElement>('upload-button')
  const keyInput = $<HTMLInputElement>('key-input')
  const maxDownloads = $<HTMLInputElement>('max-downloads')
  const expiryHours = $<HTMLInputElement>('expiry-hours')
  const drop = $('drop')

  let limits: Limits | undefined
  let file: File | undefined
  let pending: Pending | undefined = loadPending()
  let running: AbortController | undefined

  const notice = (text: string | undefined) => setText('notice', text ?? '')
  /** True while the error shown is the chosen file's size (cleared when another file fits). */
  let sizeError = false
  const showError = (text: string) => {
    sizeError = false
    setText('error', text)
  }
  const showSizeError = (text: string) => {
    showError(text)
    sizeError = true
  }

  // --- API key -----------------------------------------------------------------------------
  function renderKey (): void {
    const saved = loadKey() !== null
    $('key-form').hidden = saved
    $('key-saved').hidden = !saved
  }
  $('key-form').addEventListener('submit', e => {
    e.preventDefault()
    const key = keyInput.value.trim()
    if (key === '') return
    saveKey(key)
    keyInput.value = ''
    renderKey()
    showError('')
    notice('API key saved in this browser.')
    fileInput.focus()
  })
  $('key-forget').addEventListener('click', () => {
    forgetKey()
    renderKey()
    notice('API key forgotten: it is no longer stored in this browser.')
    keyInput.focus()
  })
  renderKey()

  // --- An unfinished chunked upload (kept across reloads) ------------------------------------
  function renderPending (): void {
    const show = pending !== undefined && running === undefined
    $('resume-box').hidden = !show
    if (pending !== undefined) {
      setText('resume-text', `The upload of ${pending.name} (${formatBytes(pending.size)}) did not finish. Choose the same file again to continue where it stopped.`)
    }
    renderFile()
  }
  $('resume-discard').addEventListener('click', () => {
    clearPending()
    pending = undefined
    renderPending()
    notice('The unfinished upload was discarded.')
    fileInput.focus()
  })

  // --- Limits --------------------------------------------------------------------------------
  async function loadLimits (): Promise<void> {
    let attempt = 0
    while (limits === undefined) {
      try {
        limits = await fetchLimits()
      } catch {
        notice('Cannot reach the service to read its limits. Retrying…')
        await sleep(Math.min(30_000, 1000 * 2 ** attempt++))
      }
    }
    if (attempt > 0) notice(undefined)
    maxDownloads.max = String(limits.max_downloads)
    expiryHours.max = String(limits.max_expiry_hours)
    if (!maxDownloads.matches(':focus')) maxDownloads.value = String(limits.default_max_downloads)
    if (!expiryHours.matches(':focus')) expiryHours.value = String(limits.default_expiry_hours)
    setText('max-downloads-hint', `1 to ${limits.max_downloads.toLocaleString('en')}`)
    setText('expiry-hours-hint', `1 to ${formatHours(limits.max_expiry_hours)}`)
    setText('size-hint', `Up to ${formatBytes(limits.max_file_size)}`)
    renderFile()
  }
  loadLimits()

  // --- Choosing a file -----------------------------------------------------------------------
  const resumable = () => file !== undefined && pending !== undefined && isSameFile(pending, file) ? pending : undefined

  function renderFile (): void {
    if (file === undefined) {
      setText('file-info', '')
      uploadButton.textContent = 'Upload'
      return
    }
    const resume = resumable()
    setText('file-info', `${file.name} · ${formatBytes(file.size)}${resume !== undefined ? ' · continues the unfinished upload' : ''}`)
    uploadButton.textContent = resume !== undefined ? 'Resume upload' : 'Upload'
    // A resumed session keeps the settings it started with: show them, fixed.
    for (const [input, value] of [[maxDownloads, resume?.maxDownloads], [expiryHours, resume?.expiryHours]] as const) {
      if (value !== undefined) input.value = String(value)
      input.readOnly = value !== undefined
    }
    const p = limits !== undefined && resume === undefined ? plan(file.size, limits) : undefined
    if (p?.mode === 'too-large') {
      showSizeError(tooLarge(file.size, p.limit).message)
    } else if (sizeError) {
      showError('')
    }
  }

  function choose (f: File | undefined): void {
    file = f
    notice(undefined)
    renderFile()
  }

  fileInput.addEventListener('change', () => choose(fileInput.files?.[0]))
  const carriesFiles = (e: DragEvent) => e.dataTransfer?.types.includes('Files') === true
  drop.addEventListener('dragover', e => {
    if (!carriesFiles(e) || running !== undefined) return
    e.preventDefault()
    drop.classList.add('over')
  })
  drop.addEventListener('dragleave', () => drop.classList.remove('over'))
  drop.addEventListener('drop', e => {
    e.preventDefault()
    drop.classList.remove('over')
    const files = e.dataTransfer?.files
    if (running !== undefined || files === undefined || files.length === 0) return
    if (files.length === 1) fileInput.files = files
    choose(files[0])
    if (files.length > 1) notice(`One file at a time: took ${files[0]!.name}.`)
  })
  // A file dropped beside the drop zone must not make the browser leave the page.
  for (const type of ['dragover', 'drop'] as const) {
    window.addEventListener(type, e => { if (carriesFiles(e)) e.preventDefault() })
  }

  // --- Uploading -----------------------------------------------------------------------------
  uploadForm.addEventListener('submit', e => {
    e.preventDefault()
    start()
  })
  $('cancel').addEventListener('click', () => running?.abort())

  async function start (): Promise<void> {
    showError('')
    const key = loadKey()
    if (key === null) {
      showError('Enter your API key first: uploads need one.')
      keyInput.focus()
      return
    }
    if (file === undefined) {
      showError('Choose a file first.')
      fileInput.focus()
      return
    }
    if (limits === undefined) {
      showError('The service\'s limits have not loaded yet; try again in a moment.')
      return
    }
    const resume = resumable()
    if (resume === undefined) {
      const p = plan(file.size, limits)
      if (p.mode === 'too-large') {
        showSizeError(tooLarge(file.size, p.limit).message)
        fileInput.focus()
        return
      }
      if (!uploadForm.reportValidity()) return
      if (pending !== undefined) {
        // A different file replaces the unfinished upload (its session simply expires).
        clearPending()
        pending = undefined
      }
    }

    const controller = new AbortController()
    running = controller
    const chosen = file
    renderPending()
    $<HTMLFieldSetElement>('upload-fields').disabled = true
    setText('progress-title', `Uploading ${chosen.name}`)
    $('progress-box').hidden = false
    notice(resume !== undefined ? 'Checking what the service already has…' : undefined)
    const progress = new ProgressText()
    try {
      const result = await uploadFile(chosen, {
        key,
        maxDownloads: Number(maxDownloads.value),
        expiryHours: Number(expiryHours.value),
        limits,
        signal: controller.signal
      }, {
        progress: p => progress.update(p),
        notice: (text, waiting = false) => {
          notice(text)
          progress.pause(waiting)
        }
      }, resume)
      uploadForm.hidden = true
      notice('Upload complete.')
      showResult(result)
    } catch (err) {
      notice(undefined)
      if (controller.signal.aborted) {
        clearPending()
        notice('Upload cancelled.')
      } else if (err instanceof UploadFailure) {
        showError(err.message)
        if (err.kind === 'key') {
          forgetKey()
          renderKey()
          keyInput.focus()
        }
      } else {
        showError(`The upload stopped: ${err instanceof Error ? err.message : String(err)}`)
      }
    } finally {
      progress.stop()
      running = undefined
      $('progress-box').hidden = true
      $<HTMLFieldSetElement>('upload-fields').disabled = false
      pending = loadPending()
      renderPending()
    }
  }

  $('again').addEventListener('click', () => {
    $('result-box').hidden = true
    uploadForm.hidden = false
    fileInput.value = ''
    choose(undefined)
    fileInput.focus()
  })

  initCopyButtons(text => notice(text))
  renderPending()
}

// The view follows the path.
const infoPath = /^\/d\/([^/]+)\/?$/.exec(location.pathname)
if (infoPath !== null) {
  let code = ''
  try {
    code = decodeURIComponent(infoPath[1]!)
  } catch { /* not a code */ }
  showInfo(code)
} else {
  initUpload()
  initCodeBox()
}
