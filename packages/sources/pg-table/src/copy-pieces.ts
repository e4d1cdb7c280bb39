/**
 * The buffers a window's COPY FROM is sent in (binary-copy.ts), used again once the socket has
 * written them. A streamed copy sent a fresh 256 KiB piece per 256 KiB: ~4,000 a million rows, each
 * a new allocation outside V8's heap, whose pages the kernel then had to map as the piece was
 * filled, and which the garbage collector had to find again (FINDINGS, 2026-12-07, fifteenth
 * session). A piece is given back only after the driver's socket reported it written: from then on
 * nothing but this module holds it.
 */

/** Bytes of a COPY FROM's data message: a window goes to the server in pieces of this size. */
export const COPY_CHUNK_BYTES = 256 * 1024;

/**
 * Pieces kept for the next window, per process: a COPY has one or two pieces in the socket at a
 * time (it waits for a drain after each), a worker a few COPYs at once; more than this are let go.
 */
const MOST_SPARE = 8;
const spare: Buffer[] = [];

/**
 * A buffer of at least `size` bytes to fill. A piece of the usual size comes from the spare ones
 * when there are any; a small one (the end of a window, a row rewritten alone) and one larger than
 * a piece (a single wide row) are allocated as they are, at their own size.
 */
export function takePiece(size: number): Buffer {
  if (size > COPY_CHUNK_BYTES || size <= COPY_CHUNK_BYTES / 2) return Buffer.allocUnsafe(size);
  return spare.pop() ?? Buffer.allocUnsafeSlow(COPY_CHUNK_BYTES);
}

/**
 * Gives back a piece (or the part of it that was sent) once the socket has written it. Only a
 * buffer takePiece made at the usual size is kept: it owns its memory whole.
 */
export function givePieceBack(sent: Buffer): void {
  if (spare.length >= MOST_SPARE) return;
  if (sent.byteOffset !== 0 || sent.buffer.byteLength !== COPY_CHUNK_BYTES) return;
  spare.push(Buffer.from(sent.buffer, 0, COPY_CHUNK_BYTES));
}
