import { API_KEY, rawMultipart, type Answer } from './app.js'

type Fields = Array<[string, string]>

/** POSTs a multipart form of text fields (and an optional trailing chunk) to a chunked endpoint. */
export async function post (url: string, path: string, fields: Fields, chunk?: Uint8Array, key = API_KEY) {
  const parts: Parameters<typeof rawMultipart>[0] = fields.map(([name, data]) => ({ name, data }))
  if (chunk !== undefined) parts.push({ name: 'chunk', filename: 'blob', data: chunk })
  const { body, contentType } = rawMultipart(parts)
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'x-client-key': key, 'content-type': contentType }, body })
  return { status: res.status, headers: res.headers, body: await res.json() as Answer }
}

export async function startSession (url: string, fields: Fields) {
  const res = await post(url, '/upload/start', fields)
  if (res.status !== 200) throw new Error(`start failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.upload_id!
}

export const sendChunk = (url: string, id: string, index: number, data: Uint8Array) =>
  post(url, '/upload/chunk', [['upload_id', id], ['chunk_index', String(index)]], data)
