import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3'
import type { TestS3 } from './s3.js'

export interface SentCommand { name: string, input: Record<string, unknown> }

/** A plain S3 client for the test endpoint, sending plain bodies as the service does by default (S3_CHECKSUM_MODE=when_required). */
export function testS3Client (s3: TestS3, extra: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...extra
  })
}

/**
 * An S3 client for the test endpoint that records every command it sends, so tests can
 * assert what the service asks of S3 (part sizes, order) even where the server is lax.
 */
export function recordingClient (s3: TestS3, extra: Partial<S3ClientConfig> = {}): { client: S3Client, sent: SentCommand[], faults: Set<string> } {
  const client = testS3Client(s3, extra)
  const sent: SentCommand[] = []
  /** Command names (e.g. 'GetObjectCommand') that fail with an injected S3 500 until removed. */
  const faults = new Set<string>()
  client.middlewareStack.add((next, context) => async args => {
    if (faults.has(context.commandName ?? '')) {
      throw Object.assign(new Error(`injected fault in ${context.commandName ?? '?'}`), { name: 'InternalError', $metadata: { httpStatusCode: 500 } })
    }
    const input = args.input as Record<string, unknown>
    const body = input.Body
    sent.push({
      name: context.commandName ?? '?',
      input: { ...input, Body: body === undefined ? undefined : { byteLength: (body as Uint8Array).byteLength } }
    })
    return next(args)
  }, { step: 'initialize', name: 'recordCommands' })
  return { client, sent, faults }
}
