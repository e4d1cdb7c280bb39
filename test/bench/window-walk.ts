import { finished } from "node:stream/promises";
import type { Database } from "@drover/db";
import { ulidFloor } from "@drover/source-pg-table";

type Sql = Database["sql"];

/**
 * The streamed pg-table path's own data movement with no engine around it, walked by hand in the
 * bench's process: slots of `slotMs` over [from, to) shared by `lanes` lanes; each slot read by
 * keyset pages of `page` rows, each a binary COPY out of the source; each window of `window` rows one
 * transaction of the product database: a savepoint, a binary COPY into `target`, a checkpoint row
 * updated, the commit. No claims, queue, accounting or tracing: Drover against it is what the
 * engine costs; it against the plain pipe is what cutting a copy into resumable windows costs.
 */
export interface WindowWalk {
  /** The source table, `schema.table`, with columns id (a ULID), room_id and data. */
  table: string;
  /** An empty table of the product database taking (id, room_id, data), its other columns defaulted. */
  target: string;
  /** A one-row table (n bigint, at timestamptz) each window updates, as a window's checkpoint does. */
  checkpoint: string;
  from: number;
  to: number;
  slotMs: number;
  lanes: number;
  page: number;
  window: number;
}

const HEADER = Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)]);
const TRAILER = Buffer.from([0xff, 0xff]);

/** A binary COPY's tuples (after the header, before the trailer), each as its bytes. */
function tuplesOf(data: Buffer): Buffer[] {
  let at = HEADER.length + data.readInt32BE(HEADER.length - 4);
  const tuples: Buffer[] = [];
  for (;;) {
    const fields = data.readInt16BE(at);
    if (fields === -1) return tuples;
    const start = at;
    at += 2;
    for (let f = 0; f < fields; f++) {
      const length = data.readInt32BE(at);
      at += 4 + Math.max(length, 0);
    }
    tuples.push(data.subarray(start, at));
  }
}

/** Walks the windows; `product` needs `lanes` connections. Resolves with the seconds it took. */
export async function walkWindows(source: Sql, product: Sql, walk: WindowWalk): Promise<number> {
  const started = performance.now();
  const slots: [number, number][] = [];
  for (let t = walk.from; t < walk.to; t += walk.slotMs) slots.push([t, Math.min(t + walk.slotMs, walk.to)]);
  const copyOut = async (query: string) => {
    const stream = await source.unsafe(`copy (${query}) to stdout (format binary)`).readable();
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    await finished(stream);
    return tuplesOf(Buffer.concat(chunks));
  };
  const lane = async () => {
    for (let slot = slots.shift(); slot; slot = slots.shift()) {
      const [low, high] = slot.map(ulidFloor) as [string, string];
      let last = "";
      for (;;) {
        const page = await copyOut(
          `select id, room_id, data from ${walk.table}
            where id >= '${low}' and id < '${high}' and id > '${last}' order by id limit ${walk.page}`,
        );
        for (let i = 0; i < page.length; i += walk.window) {
          const window = page.slice(i, i + walk.window);
          await product.begin(async (tx) => {
            await tx.savepoint(async (sp) => {
              const into = await sp
                .unsafe(`copy ${walk.target} (id, room_id, data) from stdin (format binary)`)
                .writable();
              into.end(Buffer.concat([HEADER, ...window, TRAILER]));
              await finished(into);
            });
            await tx.unsafe(`update ${walk.checkpoint} set n = n + ${window.length}, at = now()`);
          });
        }
        if (page.length < walk.page) break;
        const lastTuple = page[page.length - 1]!;
        last = lastTuple.toString("utf8", 6, 6 + lastTuple.readInt32BE(2));
      }
    }
  };
  await Promise.all(Array.from({ length: walk.lanes }, lane));
  return (performance.now() - started) / 1000;
}
