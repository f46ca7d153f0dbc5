/**
 * The upload view at /: the API key, the file (picked or dropped), its settings within the
 * service's limits, an unfinished upload to resume, then progress and the result. Uploading
 * itself is upload.ts's (chunked.ts, context.ts); this wires it to the page's elements, with
 * progress.ts and result.ts. One instance, made by main.ts; each part is one method.
 */
import { NO_ANSWER, retryWait } from '../../src/api/retry.js'
import { checkKey, fetchLimits, type Limits } from './api.js'
import { $, setText, sleep } from './dom.js'
import { formatBytes, formatHours } from './format.js'
import { ProgressText } from './progress.js'
import { initCopyButtons, showResult } from './result.js'
import { clearPending, forgetKey, isSameFile, loadKey, loadPending, saveKey, type Pending } from './store.js'
import { plan, tooLarge, UploadFailure, uploadFile, type Result } from './upload.js'

/** What an upload starts with, once everything it needs is there. */
interface Ready { key: string, file: File, limits: Limits, resume: Pending | undefined }

export class UploadView {
  private readonly fileInput = $<HTMLInputElement>('file-input')
  private readonly form = $<HTMLFormElement>('upload-form')
  private readonly button = $<HTMLButtonElement>('upload-button')
  private readonly keyInput = $<HTMLInputElement>('key-input')
  private readonly maxDownloads = $<HTMLInputElement>('max-downloads')
  private readonly expiryHours = $<HTMLInputElement>('expiry-hours')
  private readonly drop = $('drop')

  private limits: Limits | undefined
  private file: File | undefined
  private pending: Pending | undefined = loadPending()
  private running: AbortController | undefined
  /** True while the error shown is the chosen file's size (cleared when another file fits). */
  private sizeError = false

  constructor () {
    $('upload-view').hidden = false
    this.wireKey()
    this.wirePending()
    this.wireFileChoice()
    this.wireUpload()
    initCopyButtons(text => this.notice(text))
    this.renderKey()
    this.renderPending()
    this.loadLimits().catch(() => {}) // it retries until it answers
  }

  private notice (text: string | undefined): void {
    setText('notice', text ?? '')
  }

  private showError (text: string, size = false): void {
    setText('error', text)
    this.sizeError = size
  }

  // --- API key -----------------------------------------------------------------------------

  private wireKey (): void {
    $('key-form').addEventListener('submit', e => {
      e.preventDefault()
      const key = this.keyInput.value.trim()
      if (key === '') return
      // Checked when saved (GET /key changes nothing), so a wrong key shows now, not at upload.
      this.notice('Checking the key…')
      checkKey(key).then(checked => {
        if (checked.status === 'refused') {
          this.notice('')
          this.showError('The service does not accept this key (401). Check it with whoever runs this service; it was not saved.')
          this.keyInput.focus()
          return
        }
        saveKey(key)
        this.keyInput.value = ''
        this.renderKey()
        this.showError('')
        this.notice(checked.status === 'ok'
          ? `API key saved in this browser: the service knows it as ${checked.name}.`
          : 'API key saved in this browser. The service could not be reached to check it; an upload will tell.')
        this.fileInput.focus()
      }, () => {})
    })
    $('key-forget').addEventListener('click', () => {
      forgetKey()
      this.renderKey()
      this.notice('API key forgotten: it is no longer stored in this browser.')
      this.keyInput.focus()
    })
  }

  private renderKey (): void {
    const saved = loadKey() !== null
    $('key-form').hidden = saved
    $('key-saved').hidden = !saved
  }

  // --- An unfinished chunked upload (kept across reloads) ------------------------------------

  private wirePending (): void {
    $('resume-discard').addEventListener('click', () => {
      clearPending()
      this.pending = undefined
      this.renderPending()
      this.notice('The unfinished upload was discarded.')
      this.fileInput.focus()
    })
  }

  private renderPending (): void {
    const { pending } = this
    $('resume-box').hidden = pending === undefined || this.running !== undefined
    if (pending !== undefined) {
      setText('resume-text', `The upload of ${pending.name} (${formatBytes(pending.size)}) did not finish. Choose the same file again to continue where it stopped.`)
    }
    this.renderFile()
  }

  /** The unfinished upload the chosen file continues, if it is that file. */
  private resumable (): Pending | undefined {
    const { file, pending } = this
    return file !== undefined && pending !== undefined && isSameFile(pending, file) ? pending : undefined
  }

  // --- Limits --------------------------------------------------------------------------------

  /** GET /limits until it answers (the clients' backoff: api/retry.ts), then the fields' bounds. */
  private async loadLimits (): Promise<void> {
    let attempt = 0
    while (this.limits === undefined) {
      try {
        this.limits = await fetchLimits()
      } catch {
        this.notice('Cannot reach the service to read its limits. Retrying…')
        await sleep(retryWait({ status: NO_ANSWER, retryAfterMs: undefined, fromService: false }, attempt++).ms)
      }
    }
    if (attempt > 0) this.notice(undefined)
    const { limits, maxDownloads, expiryHours } = this
    maxDownloads.max = String(limits.max_downloads)
    expiryHours.max = String(limits.max_expiry_hours)
    if (!maxDownloads.matches(':focus')) maxDownloads.value = String(limits.default_max_downloads)
    if (!expiryHours.matches(':focus')) expiryHours.value = String(limits.default_expiry_hours)
    setText('max-downloads-hint', `1 to ${limits.max_downloads.toLocaleString('en')}`)
    setText('expiry-hours-hint', `1 to ${formatHours(limits.max_expiry_hours)}`)
    setText('size-hint', `Up to ${formatBytes(limits.max_file_size)}`)
    this.renderFile()
  }

  // --- Choosing a file -----------------------------------------------------------------------

  private wireFileChoice (): void {
    const { drop } = this
    this.fileInput.addEventListener('change', () => this.choose(this.fileInput.files?.[0]))
    const carriesFiles = (e: DragEvent) => e.dataTransfer?.types.includes('Files') === true
    drop.addEventListener('dragover', e => {
      if (!carriesFiles(e) || this.running !== undefined) return
      e.preventDefault()
      drop.classList.add('over')
    })
    drop.addEventListener('dragleave', () => drop.classList.remove('over'))
    drop.addEventListener('drop', e => {
      e.preventDefault()
      drop.classList.remove('over')
      const files = e.dataTransfer?.files
      if (this.running !== undefined || files === undefined || files.length === 0) return
      if (files.length === 1) this.fileInput.files = files
      this.choose(files[0])
      if (files.length > 1) this.notice(`One file at a time: took ${files[0]!.name}.`)
    })
    // A file dropped beside the drop zone must not make the browser leave the page.
    for (const type of ['dragover', 'drop'] as const) {
      window.addEventListener(type, e => { if (carriesFiles(e)) e.preventDefault() })
    }
  }

  private choose (f: File | undefined): void {
    this.file = f
    this.notice(undefined)
    this.renderFile()
  }

  private renderFile (): void {
    const { file, limits } = this
    if (file === undefined) {
      setText('file-info', '')
      this.button.textContent = 'Upload'
      return
    }
    const resume = this.resumable()
    setText('file-info', `${file.name} · ${formatBytes(file.size)}${resume !== undefined ? ' · continues the unfinished upload' : ''}`)
    this.button.textContent = resume !== undefined ? 'Resume upload' : 'Upload'
    // A resumed session keeps the settings it started with: show them, fixed.
    for (const [input, value] of [[this.maxDownloads, resume?.maxDownloads], [this.expiryHours, resume?.expiryHours]] as const) {
      if (value !== undefined) input.value = String(value)
      input.readOnly = value !== undefined
    }
    const p = limits !== undefined && resume === undefined ? plan(file.size, limits) : undefined
    if (p?.mode === 'too-large') this.showError(tooLarge(file.size, p.limit).message, true)
    else if (this.sizeError) this.showError('')
  }

  // --- Uploading -----------------------------------------------------------------------------

  private wireUpload (): void {
    this.form.addEventListener('submit', e => {
      e.preventDefault()
      this.start().catch(() => {}) // start reports its own failures
    })
    $('cancel').addEventListener('click', () => this.running?.abort())
    $('again').addEventListener('click', () => {
      $('result-box').hidden = true
      this.form.hidden = false
      this.fileInput.value = ''
      this.choose(undefined)
      this.fileInput.focus()
    })
  }

  /** What an upload needs, or undefined after saying what is missing. */
  private ready (): Ready | undefined {
    const key = loadKey()
    const { file, limits } = this
    if (key === null) {
      this.showError('Enter your API key first: uploads need one.')
      this.keyInput.focus()
      return undefined
    }
    if (file === undefined) {
      this.showError('Choose a file first.')
      this.fileInput.focus()
      return undefined
    }
    if (limits === undefined) {
      this.showError('The service\'s limits have not loaded yet; try again in a moment.')
      return undefined
    }
    const resume = this.resumable()
    if (resume !== undefined) return { key, file, limits, resume }
    const p = plan(file.size, limits)
    if (p.mode === 'too-large') {
      this.showError(tooLarge(file.size, p.limit).message, true)
      this.fileInput.focus()
      return undefined
    }
    if (!this.form.reportValidity()) return undefined
    if (this.pending !== undefined) {
      // A different file replaces the unfinished upload (its session simply expires).
      clearPending()
      this.pending = undefined
    }
    return { key, file, limits, resume: undefined }
  }

  private async start (): Promise<void> {
    this.showError('')
    const ready = this.ready()
    if (ready === undefined) return
    const controller = new AbortController()
    this.running = controller
    this.renderPending()
    $<HTMLFieldSetElement>('upload-fields').disabled = true
    setText('progress-title', `Uploading ${ready.file.name}`)
    $('progress-box').hidden = false
    this.notice(ready.resume !== undefined ? 'Checking what the service already has…' : undefined)
    const progress = new ProgressText()
    try {
      const result = await this.upload(ready, controller.signal, progress)
      this.form.hidden = true
      this.notice('Upload complete.')
      showResult(result)
    } catch (err) {
      this.failed(err, controller.signal)
    } finally {
      progress.stop()
      this.running = undefined
      $('progress-box').hidden = true
      $<HTMLFieldSetElement>('upload-fields').disabled = false
      this.pending = loadPending()
      this.renderPending()
    }
  }

  private async upload ({ key, file, limits, resume }: Ready, signal: AbortSignal, progress: ProgressText): Promise<Result> {
    const settings = { key, maxDownloads: Number(this.maxDownloads.value), expiryHours: Number(this.expiryHours.value), limits, signal }
    return await uploadFile(file, settings, {
      progress: p => progress.update(p),
      notice: (text, waiting = false) => {
        this.notice(text)
        progress.pause(waiting)
      }
    }, resume)
  }

  /** Says why an upload stopped; a refused key is forgotten, so the next try asks for one. */
  private failed (err: unknown, signal: AbortSignal): void {
    this.notice(undefined)
    if (signal.aborted) {
      clearPending()
      this.notice('Upload cancelled.')
    } else if (err instanceof UploadFailure) {
      this.showError(err.message)
      if (err.kind === 'key') {
        forgetKey()
        this.renderKey()
        this.keyInput.focus()
      }
    } else {
      this.showError(`The upload stopped: ${err instanceof Error ? err.message : String(err)}`)
    }
  }
}
