/**
 * Infrastructure: opens the BlobStore and the state backend chosen by the configuration,
 * decorates the app with them, and closes their clients when the app closes.
 */
import type { S3Client } from '@aws-sdk/client-s3'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { openBlobStore, type BlobStore } from '../blob/index.js'
import type { Config } from '../config.js'
import { openState, type StateBackend } from '../state/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    blobs: BlobStore
    state: StateBackend
  }
}

export interface StoresOptions {
  config: Pick<Config, 'state' | 'storage'>
  now: () => number
  /** Use this S3 client instead of building one (tests record the requests it sends). */
  s3Client?: S3Client
}

export default fp(async function stores (app: FastifyInstance, opts: StoresOptions) {
  const state = await openState(opts.config.state, { now: opts.now, log: app.log })
  app.addHook('onClose', () => state.close())
  const blobs = await openBlobStore(opts.config.storage, opts.s3Client ? { s3Client: opts.s3Client } : {})
  app.addHook('onClose', () => blobs.close())
  await blobs.store.init()
  app.decorate('state', state)
  app.decorate('blobs', blobs.store)
}, { name: 'stores' })
