/**
 * Each key's quota: the bytes it holds, kept in its ledger (KeyStore.account) as items that
 * each end by themselves: a live file (`f:CODE`, until its expiry), an open session's received
 * chunks (`s:ID`, until its idle expiry) and an upload in flight (`u:ID`, until
 * UPLOAD_TIMEOUT_SECONDS, so a crashed instance's reservations come back).
 *
 * An upload reserves before its first byte is read: its request's declared length (the
 * Content-Length, which bounds the file), atomically against every other upload of the key on
 * every instance, so concurrent uploads never take a key past its quota (the bound is 0 bytes:
 * reservations are of whole request lengths). A request without a length reserves what is left,
 * up to the key's file-size limit, and is cut at what it got. When the bytes are kept the
 * reservation becomes the file's or session's item, of the bytes actually stored; otherwise it
 * is released. A step that fails after the record's own (an instance dying in between) is
 * corrected when the item in the way ends: at worst a reservation outlives its upload until
 * the upload timeout, or a file is uncounted for the rest of its life.
 *
 * A key without a quota reserves nothing (nothing could refuse it): its kept bytes are only
 * recorded, so its usage is known at the cost of one state step per upload (or chunk), not two.
 */
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { FileRecord } from '../core/model.js'
import type { KeyStore } from '../state/index.js'
import { overLimit, whose, type ApiKey } from './keys.js'

/** Room reserved with a declared length: what the stream may carry and what is over it. */
export interface Hold {
  /** The key the bytes belong to. */
  readonly key: ApiKey
  /** Bytes the upload may store under this hold; beyond them, `over` is the refusal. */
  readonly max: number
  readonly over: 'file' | 'quota'
  /** The reservation becomes `item`'s `bytes` (added to what it holds), until `until` (epoch ms). */
  keep (item: string, bytes: number, until: number): Promise<void>
  /** The upload kept nothing: its reservation goes (idempotent). */
  release (): Promise<void>
}

export interface QuotaOptions {
  keys: KeyStore
  log: FastifyBaseLogger
  now: () => number
  /** ms after which a reservation of a crashed upload ends by itself. */
  uploadTimeoutMs: number
}

export type Quota = ReturnType<typeof createQuota>

/** A ledger item's name. */
export const fileItem = (code: string) => `f:${code}`
export const sessionItem = (id: string) => `s:${id}`

export function createQuota (opts: QuotaOptions) {
  const { keys, log, now } = opts
  const warn = (what: string) => (err: unknown) => { log.warn({ err }, `could not ${what} in its key's ledger; its quota is corrected when the item ends`) }

  /** The hold of a key without a quota: nothing reserved; kept bytes are recorded (its usage, its last use). */
  const counted = (key: ApiKey, max: number): Hold => ({
    key,
    max,
    over: 'file',
    async keep (to, bytes, until) {
      await keys.account(key.name, { add: { item: to, bytes, until }, quota: Number.MAX_SAFE_INTEGER }, now()).catch(warn('record kept bytes'))
    },
    async release () {}
  })

  return {
    /**
     * Reserves room for an upload of at most `declared` bytes (undefined: unknown) and `max` bytes
     * of content (the key's file or chunk limit). 403 QUOTA_EXCEEDED (nothing reserved) when the
     * key's quota has no room.
     */
    async reserve (key: ApiKey, declared: number | undefined, max: number): Promise<Hold> {
      const quota = key.limits.quotaBytes
      // Without a quota nothing needs room: the kept bytes are only counted (one step, not two).
      if (quota === undefined) return counted(key, max)
      const item = `u:${randomBytes(12).toString('base64url')}`
      const wanted = declared ?? max
      const until = now() + opts.uploadTimeoutMs
      const answer = await keys.account(key.name, { add: { item, bytes: wanted, until }, quota, upTo: declared === undefined }, now())
      if (!answer.ok) {
        const left = Math.max(0, quota - answer.used)
        throw overLimit(key, 'quotaBytes', 'DROPCODE_QUOTA_EXCEEDED',
          `${whose(key, 'quotaBytes')} holds ${answer.used} of its quota of ${quota} bytes; this upload needs ${wanted}${declared !== undefined ? ' (its declared length)' : ''} and ${left} are left. Delete files or let them expire first.`,
          { stored_bytes: answer.used })
      }
      let open = true
      const room = Math.min(max, answer.added)
      return {
        key,
        max: room,
        over: declared === undefined && answer.added < max ? 'quota' : 'file',
        async keep (to, bytes, itemUntil) {
          if (!open) return
          open = false
          await keys.account(key.name, { drop: [item], add: { item: to, bytes, until: itemUntil } }, now()).catch(warn('record kept bytes'))
        },
        async release () {
          if (!open) return
          open = false
          await keys.account(key.name, { drop: [item] }, now()).catch(warn('release a reservation'))
        }
      }
    },

    /** Moves a session's bytes to the file it became. */
    async move (name: string, from: string | string[], to: string, bytes: number, until: number): Promise<void> {
      await keys.account(name, { drop: typeof from === 'string' ? [from] : from, add: { item: to, bytes, until } }, now()).catch(warn('move a session\'s bytes to its file'))
    },

    /** Item `item` of `name` is gone (a session removed): its bytes return. */
    async drop (name: string, item: string): Promise<void> {
      await keys.account(name, { drop: [item] }, now()).catch(warn('return bytes'))
    },

    /** A file is no longer live (deleted, or its last download claimed): its bytes return to its key. */
    async fileGone (file: FileRecord): Promise<void> {
      if (file.keyName === undefined) return
      await keys.account(file.keyName, { drop: [fileItem(file.code)] }, now()).catch(warn('return a file\'s bytes'))
    }
  }
}
