import type { PgTableConfig } from "./config.js";
import type { SourceRecord } from "./source-table.js";

/**
 * How many rows a keyset page and a write window take, per copy path.
 *
 * In the database a window is one INSERT … SELECT whose cost beyond its rows is per transaction
 * (the commit, the checkpoint): 2,000 rows a window copied ~1.5× faster than 500.
 *
 * Streamed, the same holds for a window's binary COPY: on 1,000,000 room events (~1.4 KB a row, two
 * lanes, by hand with no engine) windows of 500 rows took 24–30 s, of 2,000 19 s and of 5,000
 * 15–19 s, where the plain pipe took 19–21 s. But a streamed page and the next one, read meanwhile,
 * are in the worker's memory, and a row can be any width: 5,000 rows of 50 KB would be 250 MB a
 * page. So streamed pages are bounded by bytes as well as rows: the streamed copies a worker runs at
 * once share STREAMED_BYTES_PER_WORKER, two pages each, sized from the width of the rows the slot's
 * last page held (or, for a task's first page, the last one this process read of the same table),
 * never more rows than the path's (or the run's pageSize). A page is written as one window (unless
 * the run's windowSize says less): the window goes to the server in pieces as it is made
 * (binary-copy.ts), so it takes no memory of its own. A worker's copies then hold about as much
 * whatever its lane width and the table: two lanes copying room events take ~3,000-row windows,
 * four ~1,500. (Per lane instead, pages of 4 MiB and windows of 2 MiB, the window built whole, took
 * a worker of four lanes to 285–302 MB, against 256–266 with 1,000-row pages; the goal is 300.)
 */
const COPY_SIZES = {
  streamed: { page: 5_000, window: 5_000 },
  "in-database": { page: 10_000, window: 5_000 },
} as const;

export type CopyPath = keyof typeof COPY_SIZES;

const MiB = 1024 * 1024;
/** Bytes the streamed pages and windows of one worker's copies share. */
export const STREAMED_BYTES_PER_WORKER = 16 * MiB;
/** A first page of a table whose row width this process does not know yet. */
const FIRST_PAGE_ROWS = 250;

/** Streamed copies (and re-drives) this process is running now: they share the bytes. */
let streaming = 0;

/** Counts a streamed task in until the returned function is called (once). */
export function streamingTask(): () => void {
  streaming++;
  let done = false;
  return () => {
    if (!done) streaming--;
    done = true;
  };
}

/** The most rows a page and a window take on `path`: the run's own sizes, else the path's. */
export function copySizes(
  config: Pick<PgTableConfig, "pageSize" | "windowSize">,
  path: CopyPath,
): { page: number; window: number } {
  return {
    page: config.pageSize ?? COPY_SIZES[path].page,
    window: config.windowSize ?? COPY_SIZES[path].window,
  };
}

/** The average bytes of a page's rows as they travel (their binary COPY tuples), if it carried them. */
export function rowBytesOf(page: readonly SourceRecord[]): number | undefined {
  let bytes = 0;
  for (const r of page) {
    if (!r.tuple) return undefined;
    bytes += r.tuple.bytes.length;
  }
  return page.length > 0 ? bytes / page.length : undefined;
}

/**
 * Streamed rows per page and per window for rows of `rowBytes` (unknown: a small first page) when
 * `tasks` streamed copies share the worker's bytes: a page half of a task's share (it and the next
 * one at once) and written as one window, at most the path's (or the run's) rows, at least one.
 */
export function streamedSizes(
  most: { page: number; window: number },
  rowBytes: number | undefined,
  tasks = streaming,
): { page: number; window: number } {
  if (rowBytes === undefined)
    return { page: Math.min(most.page, FIRST_PAGE_ROWS), window: Math.min(most.window, FIRST_PAGE_ROWS) };
  const share = STREAMED_BYTES_PER_WORKER / Math.max(1, tasks);
  const page = Math.max(1, Math.min(most.page, Math.floor((share * 0.5) / rowBytes)));
  return { page, window: Math.min(page, most.window) };
}

/**
 * The row width this process last saw per source table, so a task's first page is as large as its
 * others.
 */
const widths = new Map<string, number>();

export function knownRowBytes(table: string): number | undefined {
  return widths.get(table);
}

function remember(table: string, rowBytes: number): void {
  widths.delete(table);
  widths.set(table, rowBytes);
  // A worker reads few tables; the oldest goes first should one copy thousands.
  if (widths.size > 1_000) widths.delete(widths.keys().next().value!);
}

/**
 * One task's streamed pages and windows: sized from the width of the rows its last page held, or,
 * before its first, what this process last read of `table` (a key naming the source database and
 * table).
 */
export class StreamedSizing {
  private rowBytes: number | undefined;

  constructor(
    private readonly table: string,
    private readonly most: { page: number; window: number },
  ) {
    this.rowBytes = knownRowBytes(table);
  }

  /** Rows for the next page and for the windows of the last page read. */
  sizes(): { page: number; window: number } {
    return streamedSizes(this.most, this.rowBytes);
  }

  /** Takes the width of a page's rows (nothing from a page that did not carry them). */
  learn(page: readonly SourceRecord[]): void {
    const width = rowBytesOf(page);
    if (width === undefined) return;
    this.rowBytes = width;
    remember(this.table, width);
  }
}
