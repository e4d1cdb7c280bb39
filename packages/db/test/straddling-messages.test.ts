import { createHash } from "node:crypto";
import { finished } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../src/index.js";
import { createTestDatabase, type TestDatabase } from "../src/testing.js";

/**
 * The driver's read loop (patches/postgres@3.4.9.patch) completes a message that straddles two
 * socket reads from the bytes it lacks and parses the rest of the read by offset. Rows of every
 * width, from a few bytes to several socket reads, must arrive whole and in order, in a COPY out
 * (CopyData, pushed as views) as in a plain select (DataRow), and the connection must go on
 * answering after them.
 */
let testDb: TestDatabase;
let database: Database;
beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 1 });
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

/** Rows of 0 to ~6 KB, so they end anywhere in a read, and every 250th ~96 KB, longer than a read. */
const ROWS = `select g, repeat(md5(g::text), case when g % 250 = 0 then 3000 else (g * 7919) % 200 end) as v
                from generate_series(1, 1500) g order by g`;

describe("messages that straddle socket reads", () => {
  it("arrive whole, in order, in a COPY out and in a select, and the connection answers after them", async () => {
    const selected = await database.sql.unsafe<{ g: number; v: string }[]>(ROWS);
    expect(selected).toHaveLength(1500);
    const expected = createHash("sha256");
    for (const r of selected) expected.update(`${r.g}\t${r.v}\n`);

    const stream = await database.sql.unsafe(`copy (${ROWS}) to stdout`).readable();
    const copied = createHash("sha256");
    let bytes = 0;
    stream.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      copied.update(chunk);
    });
    await finished(stream);
    // Several megabytes: many socket reads, nearly every one ending mid-row.
    expect(bytes).toBeGreaterThan(4_000_000);
    expect(copied.digest("hex")).toBe(expected.digest("hex"));

    const [after] = await database.sql<{ n: number }[]>`select 41 + 1 as n`;
    expect(after!.n).toBe(42);
  });
});
