/**
 * Ranges of a file's bytes, in domain words: what a resumed download asks for (a RangeSpec, as
 * its client wrote it, before anyone knows the file's size) and what is served (a ByteRange,
 * both ends inclusive, within the file). http/range.ts reads a `Range` header into a RangeSpec;
 * the file service resolves it against the file; the blob drivers read a ByteRange.
 */

/** A byte range, both ends inclusive (as in HTTP). */
export interface ByteRange { start: number, end: number }

/** Bytes from `first` to `last` (the end when undefined), or the last `suffix` bytes. */
export type RangeSpec = { first: number, last: number | undefined } | { suffix: number }

/**
 * The bytes of a file of `size` a spec asks for (the last one clamped to the end), or
 * 'unsatisfiable' when none of them exist (a start past the end, an empty suffix or file).
 */
export function resolveRange (spec: RangeSpec, size: number): ByteRange | 'unsatisfiable' {
  if ('suffix' in spec) {
    if (spec.suffix === 0 || size === 0) return 'unsatisfiable'
    return { start: Math.max(0, size - spec.suffix), end: size - 1 }
  }
  if (spec.first >= size) return 'unsatisfiable'
  return { start: spec.first, end: Math.min(spec.last ?? Infinity, size - 1) }
}
