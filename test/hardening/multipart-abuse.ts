/**
 * Hostile multipart bodies against every upload endpoint (real sockets), on each driver pair:
 * multipart-abuse-fs.test.ts and multipart-abuse-s3.test.ts (on S3, "nothing left" includes
 * no unfinished multipart upload: storageState lists them).
 *
 * What this pins, and why: the upload endpoints parse attacker-controlled multipart bodies
 * before anything else, so each malformed, oversized or tricky body must
 *   - be answered quickly (within ANSWER_WITHIN_MS; a hang ties up a connection forever),
 *   - with a 4xx and the JSON error body `{ error, code }` of the README's error table
 *     (never a 5xx: nothing here is the server's fault),
 *   - and leave storage and the cleanup index as they were (README: "Any failed upload leaves
 *     nothing behind"), for chunked endpoints the session too (a refused chunk is not
 *     recorded, a refused complete leaves the session open).
 * Every case is a well-formed request (which the `control` case shows succeeds) with one
 * hostile change, so that the 4xx is caused by that change. Where the README names the code,
 * the code is asserted; where two codes of its table both describe a case, either is accepted
 * and the comment says why.
 */
import type { Test } from 'tap'
import { API_KEY, type RunningApp } from '../helpers/app.js'
import { post, sendChunk, startSession } from '../helpers/chunks.js'
import { assertState, BOUNDARY, connect, json, Multipart, readUntilClosed, requestHead, send, storageState, type RawResponse, type StorageState } from './raw.js'

type Fields = Array<[string, string]>

interface Endpoint {
  path: string
  /** The file part the endpoint takes (null: text fields only). */
  fileField: string | null
  /** The text field that carries a number or id, inflated in the huge-value case. */
  numeric: string
  /** Creates what a well-formed request needs (a session) and returns its fields. */
  setup (running: RunningApp): Promise<{ fields: Fields, sessionId?: string }>
}

const ENDPOINTS: Endpoint[] = [
  {
    path: '/upload',
    fileField: 'file',
    numeric: 'max_downloads',
    setup: async () => ({ fields: [['max_downloads', '2']] })
  },
  {
    path: '/upload/start',
    fileField: null,
    numeric: 'total_chunks',
    setup: async () => ({ fields: [['filename', 'a.bin'], ['total_chunks', '2']] })
  },
  {
    path: '/upload/chunk',
    fileField: 'chunk',
    numeric: 'chunk_index',
    setup: async ({ url }) => {
      const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '2']])
      return { fields: [['upload_id', id], ['chunk_index', '0']], sessionId: id }
    }
  },
  {
    path: '/upload/verify',
    fileField: null,
    numeric: 'upload_id',
    setup: async ({ url }) => {
      const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '2']])
      return { fields: [['upload_id', id]], sessionId: id }
    }
  },
  {
    // A session with every chunk received: a well-formed complete succeeds.
    path: '/upload/complete',
    fileField: null,
    numeric: 'upload_id',
    setup: async ({ url }) => {
      const id = await startSession(url, [['filename', 'a.bin'], ['total_chunks', '1']])
      const sent = await sendChunk(url, id, 0, Buffer.from('the only chunk'))
      if (sent.status !== 200) throw new Error(`chunk failed: ${JSON.stringify(sent.body)}`)
      return { fields: [['upload_id', id]], sessionId: id }
    }
  }
]

const FILE_DATA = Buffer.from('file data '.repeat(100))
const MANY = 5000
const MiB = 1024 * 1024

/** The well-formed body of `ep`: its fields, then its file if it takes one. */
function wellFormed (ep: Endpoint, fields: Fields, form = new Multipart()): Multipart {
  for (const [name, value] of fields) form.field(name, value)
  if (ep.fileField !== null) form.file(ep.fileField, FILE_DATA)
  return form
}

const headers = (contentType?: string): Record<string, string> =>
  contentType === undefined ? { 'x-client-key': API_KEY } : { 'x-client-key': API_KEY, 'content-type': contentType }

const postBody = (running: RunningApp, ep: Endpoint, body: Buffer, contentType: string | undefined) =>
  send(running.url, { path: ep.path, headers: headers(contentType), body })

/** A 4xx answer with the README's JSON error body and one of `codes`. */
function assertError (t: Test, res: RawResponse, status: number, codes: string[], what: string) {
  t.equal(res.status, status, `${what}: status`)
  t.match(res.headers['content-type'], /^application\/json/, `${what}: JSON`)
  const body = json(res)
  t.type(body.error, 'string', `${what}: error is a string`)
  t.ok(codes.includes(body.code as string), `${what}: code ${String(body.code)} is one of ${codes.join(', ')}`)
}

/**
 * For chunked endpoints, the session is exactly as setup left it: a refused chunk is not
 * recorded (and its index not left locked), a refused complete leaves the session open.
 */
async function assertSessionUntouched (t: Test, running: RunningApp, ep: Endpoint, sessionId: string | undefined, what: string) {
  if (sessionId === undefined) return
  const verify = await post(running.url, '/upload/verify', [['upload_id', sessionId]])
  t.equal(verify.status, 200, `${what}: session still open`)
  t.equal(verify.body.received_chunks, ep.path === '/upload/complete' ? 1 : 0, `${what}: no chunk recorded`)
}

interface Case {
  name: string
  /** Endpoints it applies to (default: all). */
  applies?: (ep: Endpoint) => boolean
  /** The request: body and content type. */
  build: (ep: Endpoint, fields: Fields) => { body: Buffer, contentType?: string }
  /** Acceptable error codes (all 400). */
  codes: (ep: Endpoint) => string[]
}

const takesFile = (ep: Endpoint) => ep.fileField !== null
const named = (ep: Endpoint) => ep.fileField ?? 'file'
const tinyFields = (form: Multipart, n: number) => { for (let i = 0; i < n; i++) form.field(`f${i}`, 'x'); return form }
const mp = (form: Multipart) => ({ body: form.body(), contentType: form.contentType })
const withType = (contentType: string | undefined) => (ep: Endpoint, fields: Fields) =>
  ({ body: wellFormed(ep, fields).body(), ...(contentType !== undefined ? { contentType } : {}) })

/** Declared and sent length agree, the request ends normally, but the multipart body is cut. */
const truncated = (cut: (ep: Endpoint, fields: Fields) => Buffer) => (ep: Endpoint, fields: Fields) =>
  ({ body: cut(ep, fields), contentType: new Multipart().contentType })

const CASES: Case[] = [
  {
    name: `${MANY} tiny text fields`,
    build: (ep, fields) => mp(tinyFields(wellFormedFieldsOnly(fields), MANY)),
    codes: () => ['DROPCODE_TOO_MANY_PARTS']
  },
  {
    name: `${MANY} text fields before the file`,
    applies: takesFile,
    build: (ep, fields) => mp(tinyFields(wellFormedFieldsOnly(fields), MANY).file(ep.fileField!, FILE_DATA)),
    codes: () => ['DROPCODE_TOO_MANY_PARTS']
  },
  {
    name: `the file, then ${MANY} text fields`,
    applies: takesFile,
    build: (ep, fields) => mp(tinyFields(wellFormed(ep, fields), MANY)),
    codes: () => ['DROPCODE_TOO_MANY_PARTS']
  },
  {
    // A second file part is TOO_MANY_FILES (README) but the part count also passes the
    // limits: both codes of the table describe it. Without a file field, any file is refused.
    name: `${MANY} empty file parts`,
    build: (ep, fields) => {
      const form = wellFormedFieldsOnly(fields)
      for (let i = 0; i < MANY; i++) form.file(named(ep), '')
      return mp(form)
    },
    codes: ep => takesFile(ep) ? ['DROPCODE_TOO_MANY_FILES', 'DROPCODE_TOO_MANY_PARTS'] : ['DROPCODE_INVALID_FIELD']
  },
  {
    name: 'a 1 MiB value in the numeric field, before the file',
    build: (ep, fields) => mp(wellFormed(ep, fields.map(([n, v]) => [n, n === ep.numeric ? '1'.repeat(MiB) : v]))),
    codes: () => ['DROPCODE_INVALID_FIELD']
  },
  {
    name: 'a 1 MiB max_downloads after the file',
    applies: ep => ep.path === '/upload',
    build: (ep, fields) => mp(wellFormed(ep, []).field('max_downloads', '9'.repeat(MiB))),
    codes: () => ['DROPCODE_INVALID_FIELD']
  },
  {
    name: 'a second file',
    build: (ep, fields) => mp(wellFormed(ep, fields).file(named(ep), FILE_DATA)),
    codes: ep => takesFile(ep) ? ['DROPCODE_TOO_MANY_FILES'] : ['DROPCODE_INVALID_FIELD']
  },
  ...['__proto__', 'constructor', 'prototype'].map((name): Case => ({
    // README: "a file in another field: 400 DROPCODE_INVALID_FIELD".
    name: `the file sent in a part named ${name}`,
    build: (ep, fields) => mp(wellFormedFieldsOnly(fields).file(name, FILE_DATA)),
    codes: () => ['DROPCODE_INVALID_FIELD']
  })),
  {
    // A file part without a name is a file in no field: "a file in another field".
    name: 'a file part without a name',
    build: (ep, fields) => mp(wellFormedFieldsOnly(fields).part('form-data; filename="a.bin"', FILE_DATA, { after: ['content-type: application/octet-stream'] })),
    codes: () => ['DROPCODE_INVALID_FIELD']
  },
  {
    // RFC 2046 §5.1.1: a boundary is 1 to 70 characters; a longer one makes the body malformed.
    name: 'a 200-character boundary',
    build: (ep, fields) => mp(wellFormed(ep, fields, new Multipart('b'.repeat(200)))),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  // multipart/form-data without a usable boundary: "not multipart/form-data" and "malformed
  // multipart" both describe it, so either code is accepted.
  ...[
    ['no boundary parameter', 'multipart/form-data'],
    ['a parameter but no boundary', 'multipart/form-data; charset=utf-8'],
    ['an empty boundary', 'multipart/form-data; boundary='],
    ['an empty quoted boundary', 'multipart/form-data; boundary=""'],
    ['an unclosed quote in the boundary', `multipart/form-data; boundary="${BOUNDARY}`],
    ['a stray closing quote in the boundary', `multipart/form-data; boundary=${BOUNDARY}"`]
  ].map(([name, contentType]): Case => ({
    name: `content type with ${name!}`,
    build: withType(contentType),
    codes: () => ['DROPCODE_NOT_MULTIPART', 'DROPCODE_MALFORMED_MULTIPART']
  })),
  {
    name: 'a boundary that does not occur in the body',
    build: (ep, fields) => ({ body: wellFormed(ep, fields).body(), contentType: 'multipart/form-data; boundary=some-other-boundary' }),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'LF line endings instead of CRLF',
    build: (ep, fields) => ({ body: Buffer.from(wellFormed(ep, fields).body().toString('latin1').replaceAll('\r\n', '\n'), 'latin1'), contentType: new Multipart().contentType }),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a body cut in the middle of the file data',
    applies: takesFile,
    build: truncated((ep, fields) => {
      const whole = wellFormed(ep, fields).open()
      return whole.subarray(0, whole.length - FILE_DATA.length / 2)
    }),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a body cut in the middle of a field value',
    build: truncated((ep, fields) => Buffer.concat([wellFormedFieldsOnly(fields).open(), Buffer.from(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="note"\r\n\r\nhalf a val`)])),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a body cut in the middle of part headers',
    build: truncated((ep, fields) => Buffer.concat([wellFormed(ep, fields).open(), Buffer.from(`--${BOUNDARY}\r\ncontent-disposition: form-da`)])),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a body missing only its closing delimiter',
    build: truncated((ep, fields) => wellFormed(ep, fields).open()),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a body of only an opening delimiter',
    build: truncated(() => Buffer.from(`--${BOUNDARY}\r\n`)),
    codes: () => ['DROPCODE_MALFORMED_MULTIPART']
  },
  ...[
    ['text/plain', 'text/plain'],
    ['multipart/mixed', `multipart/mixed; boundary=${BOUNDARY}`],
    ['application/json', 'application/json'],
    ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded'],
    ['a look-alike type', `multipart/form-dataX; boundary=${BOUNDARY}`],
    ['no content type', undefined]
  ].map(([name, contentType]): Case => ({
    name: `the well-formed body sent as ${name!}`,
    build: withType(contentType),
    codes: () => ['DROPCODE_NOT_MULTIPART']
  })),
  {
    // Busboy keeps only the first headerPairs (32) headers of a part, so the disposition
    // after 100 others is lost and the essential part is missing or unusable.
    name: 'the essential part with 100 headers before its disposition',
    build: (ep, fields) => {
      const junk = Array.from({ length: 100 }, (_, i) => `x-junk-${i}: ${i}`)
      const form = new Multipart()
      const [first, ...rest] = fields
      if (ep.fileField !== null) {
        for (const [name, value] of fields) form.field(name, value)
        form.file(ep.fileField, FILE_DATA, { before: junk })
      } else {
        form.field(first![0], first![1], { before: junk })
        for (const [name, value] of rest) form.field(name, value)
      }
      return mp(form)
    },
    codes: ep => ep.path === '/upload'
      ? ['DROPCODE_MISSING_FILE', 'DROPCODE_MALFORMED_MULTIPART']
      : ['DROPCODE_MISSING_FIELD', 'DROPCODE_MISSING_FILE', 'DROPCODE_MALFORMED_MULTIPART']
  },
  {
    name: 'a text field sent as application/json carrying __proto__',
    build: (ep, fields) => mp(wellFormed(ep, fields).part(
      `form-data; name="${ep.numeric}"`, '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}}}', { after: ['content-type: application/json'] }
    )),
    // The numeric field is sent twice (DUPLICATE_FIELD), or refused as a bad value first.
    codes: () => ['DROPCODE_DUPLICATE_FIELD', 'DROPCODE_INVALID_FIELD', 'DROPCODE_MALFORMED_MULTIPART']
  }
]

function wellFormedFieldsOnly (fields: Fields): Multipart {
  const form = new Multipart()
  for (const [name, value] of fields) form.field(name, value)
  return form
}

/** Nothing was polluted by a part name or value. */
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).sort()
function assertNoPollution (t: Test, what: string) {
  t.same(Object.getOwnPropertyNames(Object.prototype).sort(), PROTOTYPE_NAMES, `${what}: Object.prototype unchanged`)
  const probe = {} as Record<string, unknown>
  t.equal(probe.polluted, undefined, `${what}: ({}).polluted is undefined`)
  t.equal(probe.yes, undefined, `${what}: ({}).yes is undefined`)
  t.equal(Object.prototype.constructor, Object, `${what}: Object.prototype.constructor is Object`)
}

/** The service still takes an upload and serves it. */
async function assertServing (t: Test, running: RunningApp, what: string) {
  // Two downloads allowed: the one below leaves the file (and its object) in place, so storage
  // is settled for the next case's baseline.
  const form = new Multipart().file('file', 'still serving').field('max_downloads', '2')
  const up = await postBody(running, ENDPOINTS[0]!, form.body(), form.contentType)
  t.equal(up.status, 200, `${what}: a later upload works`)
  const code = json(up).code as string
  const res = await send(running.url, { method: 'GET', path: `/download/${code}` })
  t.equal(res.body.toString(), 'still serving', `${what}: and downloads`)
}

/** Starts the app under test, on a fresh namespace of its driver pair. */
export type StartApp = (t: Test) => Promise<RunningApp>

/** Starts an app and sets up `ep`; returns the state any request must leave unchanged. */
async function prepare (t: Test, ep: Endpoint, start: StartApp) {
  const running = await start(t)
  const { fields, sessionId } = await ep.setup(running)
  const baseline: StorageState = await storageState(running)
  return { running, fields, sessionId, baseline }
}

export function multipartAbuseSuite (t: Test, start: StartApp) {
  for (const ep of ENDPOINTS) {
    t.test(ep.path, async t => {
      // The hostile requests of one endpoint share one app (a fresh namespace costs ~0.3 s on
      // radosgw): each must leave storage, the cleanup index and the endpoint's session as it
      // found them, which is what every case asserts, so a leftover fails the case that left it.
      let shared: ReturnType<typeof prepare> | undefined
      const reuse = async () => {
        shared ??= prepare(t, ep, start)
        const { running, fields, sessionId } = await shared
        return { running, fields, sessionId, baseline: await storageState(running) }
      }

      t.test('control: the well-formed request succeeds', async t => {
        const { running, fields } = await prepare(t, ep, start)
        const res = await postBody(running, ep, wellFormed(ep, fields).body(), new Multipart().contentType)
        t.equal(res.status, 200, JSON.stringify(json(res)))
      })

      for (const c of CASES) {
        if (c.applies !== undefined && !c.applies(ep)) continue
        t.test(c.name, async t => {
          const { running, fields, sessionId, baseline } = await reuse()
          const { body, contentType } = c.build(ep, fields)
          const started = Date.now()
          const res = await postBody(running, ep, body, contentType)
          t.comment(`${res.status} ${res.body.toString().slice(0, 160)} (${Date.now() - started} ms)`)
          assertError(t, res, 400, c.codes(ep), c.name)
          await assertState(t, running, c.name, baseline)
          await assertSessionUntouched(t, running, ep, sessionId, c.name)
          assertNoPollution(t, c.name)
          await assertServing(t, running, c.name)
        })
      }

      t.test('prototype-named text fields are refused (README), store nothing, and pollute nothing', async t => {
        // Its own app: its look-alike request below succeeds (a chunk recorded, a session completed).
        const { running, fields, sessionId, baseline } = await prepare(t, ep, start)
        for (const name of ['__proto__', 'constructor']) {
          const form = wellFormedFieldsOnly(fields)
          form.field(name, 'yes')
          if (ep.fileField !== null) form.file(ep.fileField, FILE_DATA)
          const res = await postBody(running, ep, form.body(), form.contentType)
          assertError(t, res, 400, ['DROPCODE_INVALID_FIELD'], `field ${name}`)
        }
        await assertState(t, running, 'prototype-named fields', baseline)
        await assertSessionUntouched(t, running, ep, sessionId, 'prototype-named fields')
        const harmless = wellFormedFieldsOnly(fields)
        // Not properties of Object.prototype: just unknown fields, ignored.
        for (const name of ['prototype', '__proto__[polluted]', 'constructor[prototype][polluted]']) harmless.field(name, 'yes')
        if (ep.fileField !== null) harmless.file(ep.fileField, FILE_DATA)
        t.equal((await postBody(running, ep, harmless.body(), harmless.contentType)).status, 200, 'look-alike names are ordinary unknown fields')
        assertNoPollution(t, 'prototype-named fields')
        await assertServing(t, running, 'prototype-named fields')
      })

      t.test('prototype-named text fields in a request without its required part: 400, nothing stored', async t => {
        const { running, fields, sessionId, baseline } = await reuse()
        const form = new Multipart()
        // Everything but the required part: /upload loses its file, the others their first field.
        for (const [name, value] of ep.fileField === null ? fields.slice(1) : fields) form.field(name, value)
        for (const name of ['__proto__', 'constructor', 'prototype']) form.field(name, 'yes')
        const res = await postBody(running, ep, form.body(), form.contentType)
        t.comment(`${res.status} ${res.body.toString().slice(0, 160)}`)
        assertError(t, res, 400, ['DROPCODE_INVALID_FIELD'], 'prototype-named fields')
        await assertState(t, running, 'prototype-named fields', baseline)
        await assertSessionUntouched(t, running, ep, sessionId, 'prototype-named fields')
        assertNoPollution(t, 'prototype-named fields')
      })

      t.test('a part with 100 headers after its disposition is read normally', async t => {
        const { running, fields } = await prepare(t, ep, start)
        const junk = Array.from({ length: 100 }, (_, i) => `x-junk-${i}: ${i}`)
        const form = new Multipart()
        for (const [name, value] of fields) form.field(name, value, { after: junk })
        if (ep.fileField !== null) form.file(ep.fileField, FILE_DATA, { after: junk })
        const res = await postBody(running, ep, form.body(), form.contentType)
        t.comment(`${res.status} ${res.body.toString().slice(0, 160)}`)
        t.equal(res.status, 200, 'extra part headers beyond the limit are dropped, not fatal')
      })

      t.test('a body that stops mid-way with the connection left open holds nothing once the client goes', async t => {
        // Its own app: its retry below stores chunk 0 of the endpoint's session.
        const { running, fields, sessionId, baseline } = await prepare(t, ep, start)
        // Fields-only endpoints stop in a field value; file endpoints in the file data.
        const form = wellFormedFieldsOnly(fields)
        let partial: Buffer
        if (ep.fileField !== null) {
          form.raw(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="${ep.fileField}"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`)
          partial = Buffer.concat([form.open(), Buffer.alloc(256 * 1024, 1)])
        } else {
          partial = Buffer.concat([form.open(), Buffer.from(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="note"\r\n\r\nhalf`)])
        }
        const socket = await connect(running.url)
        let answered = ''
        socket.on('data', (c: Buffer) => { answered += c.toString('latin1') })
        socket.write(requestHead(ep.path, { ...headers(form.contentType), 'content-length': String(partial.length + 10 * MiB) }))
        socket.write(partial)
        // Let the server start storing what it got.
        await new Promise(resolve => setTimeout(resolve, 300))
        t.equal(answered, '', 'no answer while the body is still coming')
        socket.destroy()
        await assertState(t, running, 'after the client went away', baseline, 5000)
        await assertSessionUntouched(t, running, ep, sessionId, 'after the client went away')
        if (ep.path === '/upload/chunk') {
          // The cut attempt releases its lock as it unwinds; meanwhile a retry may get the
          // documented transient 409, never a lock held for its whole lease. The retry is as
          // large as S3's smallest part: the cut attempt's declared length (over 10 MiB) already
          // chose multipart parts for this session on S3, where a first chunk of 5 bytes would
          // be refused as DROPCODE_CHUNK_TOO_SMALL.
          const again = Buffer.alloc(5 * MiB, 7)
          let retry = await sendChunk(running.url, sessionId!, 0, again)
          const until = Date.now() + 3000
          while (retry.status === 409 && Date.now() < until) {
            await new Promise(resolve => setTimeout(resolve, 100))
            retry = await sendChunk(running.url, sessionId!, 0, again)
          }
          t.equal(retry.status, 200, `the index is not left locked: a retry is accepted (${JSON.stringify(retry.body)})`)
        }
        await assertServing(t, running, 'after the client went away')
      })

      t.test('a body that stops mid-way, then the client half-closes: answered or closed, nothing held', async t => {
        const { running, fields, sessionId, baseline } = await reuse()
        const partial = wellFormed(ep, fields).open().subarray(0, -20)
        const socket = await connect(running.url)
        socket.write(requestHead(ep.path, { ...headers(new Multipart().contentType), 'content-length': String(partial.length + MiB) }))
        socket.end(partial)
        const answer = await readUntilClosed(socket)
        t.comment(JSON.stringify(answer.slice(0, 200)))
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]
        t.ok(status === undefined || /^4/.test(status), `no answer or a 4xx (got ${String(status)})`)
        if (status !== undefined) {
          const start = answer.indexOf('\r\n\r\n') + 4
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(answer)?.[1] ?? answer.length)
          const body = JSON.parse(answer.slice(start, start + length)) as Record<string, unknown>
          t.type(body.error, 'string', 'error is a string')
          t.type(body.code, 'string', 'README: "Every JSON error has the body {"error", "code"}"')
        }
        await assertState(t, running, 'after the half-close', baseline, 5000)
        await assertSessionUntouched(t, running, ep, sessionId, 'after the half-close')
        await assertServing(t, running, 'after the half-close')
      })

      t.test('request headers over 100 KiB: 431 with the JSON error body, and the server keeps serving', async t => {
        const { running, fields, baseline } = await reuse()
        const form = wellFormed(ep, fields)
        const res = await send(running.url, { path: ep.path, headers: { ...headers(form.contentType), 'x-padding': 'p'.repeat(100 * 1024) }, body: form.body() })
        t.comment(`${res.status} ${res.body.toString().slice(0, 160)}`)
        t.equal(res.status, 431)
        const body = json(res)
        t.type(body.error, 'string', 'error is a string')
        t.type(body.code, 'string', 'README: "Every JSON error has the body {"error", "code"}"')
        await assertState(t, running, 'after 431', baseline)
        await assertServing(t, running, 'after 431')
      })
    })
  }
}
