import { describe, expect, it } from "vitest";
import {
  copySizes,
  knownRowBytes,
  rowBytesOf,
  STREAMED_BYTES_PER_WORKER,
  StreamedSizing,
  streamedSizes,
  streamingTask,
} from "../src/copy-sizes.js";
import type { SourceRecord } from "../src/source-table.js";

const record = (bytes: number): SourceRecord => ({
  id: "k",
  time: null,
  tuple: { bytes: Buffer.alloc(bytes), valuesAt: 0, key: "k", time: null },
});
const MOST = { page: 5_000, window: 5_000 };

describe("pg-table copy sizes", () => {
  it("takes the run's own page and window over the path's", () => {
    expect(copySizes({ pageSize: undefined, windowSize: undefined }, "streamed")).toEqual(MOST);
    expect(copySizes({ pageSize: 70, windowSize: 30 }, "in-database")).toEqual({ page: 70, window: 30 });
  });

  it("keeps the row limits for a lone copy of rows narrow enough to fit its bytes", () => {
    expect(streamedSizes(MOST, 1_000, 1)).toEqual(MOST);
  });

  it("splits the worker's bytes between the copies it runs at once: two pages each, a page one window", () => {
    const rowBytes = 1_400;
    for (const tasks of [2, 4, 8]) {
      const sizes = streamedSizes(MOST, rowBytes, tasks);
      expect(sizes.window).toBe(sizes.page);
      const held = tasks * 2 * sizes.page * rowBytes;
      expect(held).toBeLessThanOrEqual(STREAMED_BYTES_PER_WORKER);
      expect(held).toBeGreaterThan(STREAMED_BYTES_PER_WORKER * 0.9);
    }
    expect(streamedSizes(MOST, rowBytes, 4).window).toBeLessThan(streamedSizes(MOST, rowBytes, 2).window);
  });

  it("bounds a page and a window of wide rows by bytes, so memory does not grow with the row", () => {
    const wide = 50 * 1024;
    const sizes = streamedSizes(MOST, wide, 1);
    expect(sizes.page * wide).toBeLessThanOrEqual(STREAMED_BYTES_PER_WORKER * 0.5);
    expect(sizes.window).toBe(sizes.page);
    // A row wider than a whole share still moves, one a window.
    expect(streamedSizes(MOST, 64 * 1024 * 1024, 1)).toEqual({ page: 1, window: 1 });
  });

  it("reads a small first page while the rows' width is unknown", () => {
    expect(streamedSizes(MOST, undefined, 1)).toEqual({ page: 250, window: 250 });
    expect(streamedSizes({ page: 70, window: 30 }, undefined, 1)).toEqual({ page: 70, window: 30 });
  });

  it("keeps a run's smaller window inside the page", () => {
    expect(streamedSizes({ page: 5_000, window: 300 }, 1_400, 2)).toEqual({ page: 2_995, window: 300 });
  });

  it("counts a streamed task until it leaves, once however often it says so", () => {
    const alone = streamedSizes(MOST, 10_000);
    const leaveA = streamingTask();
    const leaveB = streamingTask();
    const shared = streamedSizes(MOST, 10_000);
    expect(shared.page).toBeLessThan(alone.page);
    leaveA();
    leaveA();
    expect(streamedSizes(MOST, 10_000).page).toBeGreaterThan(shared.page);
    leaveB();
    expect(streamedSizes(MOST, 10_000)).toEqual(alone);
  });

  it("measures a page's rows as they travel, and knows nothing of a page without them", () => {
    expect(rowBytesOf([record(100), record(300)])).toBe(200);
    expect(rowBytesOf([])).toBeUndefined();
    expect(rowBytesOf([{ id: "k", time: null, tuple: undefined }])).toBeUndefined();
  });

  it("sizes a task's pages from its last page, and its first from what the process last read of the table", () => {
    const table = `test|${Math.random()}`;
    expect(knownRowBytes(table)).toBeUndefined();
    const first = new StreamedSizing(table, MOST);
    expect(first.sizes().page).toBe(250);
    first.learn([{ id: "k", time: null, tuple: undefined }]);
    expect(first.sizes().page).toBe(250);
    first.learn([record(1_000), record(1_000)]);
    expect(knownRowBytes(table)).toBe(1_000);
    expect(first.sizes()).toEqual(streamedSizes(MOST, 1_000));
    const next = new StreamedSizing(table, MOST);
    expect(next.sizes()).toEqual(first.sizes());
  });
});
