import { describe, expect, it } from "vitest";
import { COPY_CHUNK_BYTES, givePieceBack, takePiece } from "../src/copy-pieces.js";

describe("a window's COPY pieces", () => {
  it("a piece given back once sent is the next one taken, whatever part of it was sent", () => {
    const first = takePiece(COPY_CHUNK_BYTES);
    expect(first.length).toBe(COPY_CHUNK_BYTES);
    givePieceBack(first.subarray(0, 1_000));
    const next = takePiece(COPY_CHUNK_BYTES * 0.75);
    expect(next.buffer).toBe(first.buffer);
    expect(next.length).toBe(COPY_CHUNK_BYTES);
  });

  it("a buffer it did not make at the usual size is never kept: a row's own piece, a view into another", () => {
    const wide = takePiece(COPY_CHUNK_BYTES + 10);
    expect(wide.length).toBe(COPY_CHUNK_BYTES + 10);
    givePieceBack(wide);
    const small = takePiece(100);
    expect(small.buffer.byteLength).toBeLessThan(COPY_CHUNK_BYTES);
    givePieceBack(small);
    const big = Buffer.allocUnsafeSlow(COPY_CHUNK_BYTES * 2);
    givePieceBack(big.subarray(COPY_CHUNK_BYTES));
    const taken = takePiece(COPY_CHUNK_BYTES);
    for (const foreign of [wide, small, big]) expect(taken.buffer).not.toBe(foreign.buffer);
  });
});
