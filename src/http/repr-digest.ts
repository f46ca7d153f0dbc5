/** What an answer says of a stored file's bytes and code (RFC 9530 Repr-Digest, Dropcode-Code). */
import type { FastifyReply } from 'fastify'

/** Repr-Digest of the whole representation, from its SHA-256 (hex). */
export const reprDigest = (sha256: string) => `sha-256=:${Buffer.from(sha256, 'hex').toString('base64')}:`

/** An upload that became a file (tus, the IETF draft): its code and its digest. */
export function completedHeaders (reply: FastifyReply, completed: { code: string, sha256: string }): void {
  reply.header('dropcode-code', completed.code)
  reply.header('repr-digest', reprDigest(completed.sha256))
}
