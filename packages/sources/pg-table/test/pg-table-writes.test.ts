import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { claimTask, readRunFact, settleRunFact, toRunInfo, writeBatches } from "@drover/engine";
import { type TaskContext, TransientError, type WriteSummary } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  COPY_CHUNK_BYTES,
  copyChunks,
  copyOut,
  copyRow,
  copyWindow,
  sourceColumns,
  splitTuples,
} from "../src/binary-copy.js";
import { parsePgTableSettings } from "../src/config.js";
import { streamingTask } from "../src/copy-sizes.js";
import { destinationShape } from "../src/destination-table.js";
import { copyInDatabase, inDatabasePlan, settledSharing, sharesDatabase } from "../src/in-database-copy.js";
import { pgTableProvider } from "../src/provider.js";
import { PG_TABLE_KIND } from "../src/slots.js";
import { closePgTableSources, readPage, sourceDatabase } from "../src/source-table.js";
import { makeUlid } from "../src/ulid.js";

/**
 * How a pg-table window reaches the destination, against real Postgres: as one separated text per
 * column when the rows travel through the worker, and as one INSERT … SELECT when the source table
 * is in the product database itself, which only the server can confirm.
 */
let testDb: TestDatabase;
let other: TestDatabase;
let database: ReturnType<typeof openDatabase>;
const statements: string[] = [];

const HOUR = 3_600_000;
const FROM = Date.parse("2024-10-01T00:00:00Z");

beforeAll(async () => {
  [testDb, other] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  database = openDatabase(testDb.url, { max: 3, debug: (q) => statements.push(q.trim().toLowerCase()) });
});
afterAll(async () => {
  await closePgTableSources();
  await database?.close();
  await Promise.all([testDb?.drop(), other?.drop()]);
});

const SETTINGS = {
  table: "src.events",
  destination: "app.room_events",
  tenantColumn: "tenant_id",
  mapping: "id=id,room_id=room_id,data=data",
  from: new Date(FROM).toISOString(),
  to: new Date(FROM + HOUR).toISOString(),
};

function config(extra: Record<string, string> = {}) {
  const parsed = parsePgTableSettings({ ...SETTINGS, ...extra });
  if (typeof parsed === "string") throw new Error(parsed);
  return parsed;
}

/** A source table of `rows` events in the first slot hour, in `url`'s database, schema src. */
async function sourceEvents(url: string, table: string, rows: number, roomType = "uuid") {
  const db = openDatabase(url, { max: 1 });
  try {
    await db.sql.unsafe(`create schema if not exists src`);
    await db.sql.unsafe(
      `create table src.${table} (id text primary key, room_id ${roomType}, data jsonb not null)`,
    );
    const ids = Array.from({ length: rows }, (_, i) => makeUlid(FROM + i * 1_000));
    await db.sql.unsafe(
      `insert into src.${table}
       select id, md5(id)::uuid, jsonb_build_object('n', n, 'text', repeat('é"\\', 3)) from unnest($1::text[]) with ordinality as u(id, n)`,
      [ids],
    );
    return ids;
  } finally {
    await db.close();
  }
}

/**
 * A claimed pg-table task of a run whose secret is `connection` (a new run, or `runId`'s), and a
 * TaskContext for it.
 */
async function slotTask(connection: string, extra: Record<string, string>, runId?: string) {
  const db = database.db;
  const settings = { ...SETTINGS, ...extra };
  const [run] = runId
    ? [{ id: runId }]
    : await db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, source_config, status, started_at)
    values ('t-writes', 'pg-table', ${`acct-${Math.random()}`}, ${sql.param([PG_TABLE_KIND])}::text[],
            ${JSON.stringify([[PG_TABLE_KIND]])}::jsonb, ${JSON.stringify({ settings })}::jsonb, 'running', now())
    returning id`);
  const cursor = { from: FROM, to: FROM + HOUR };
  const [task] = await db.execute<{ id: string }>(sql`
    insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
    values (${run!.id}::uuid, ${PG_TABLE_KIND}, 0, ${`k-${Math.random()}`}, ${JSON.stringify(cursor)}::jsonb) returning id`);
  const claimed = (await claimTask(db, Number(task!.id), `w/${task!.id}`))!;
  const [runRow] = await db.query.runs.findMany({ where: (r, { eq }) => eq(r.id, run!.id) });
  const deps = {
    db,
    run: { ...toRunInfo(runRow!), secret: connection },
    task: { id: claimed.id, kind: PG_TABLE_KIND, phase: 0, cursor, processedOffset: 0, attempts: 1 },
    claimToken: claimed.lockedBy!,
    notesCap: 1000,
    stopRequested: async () => false,
    ledger: "none" as const,
  };
  const summary: WriteSummary = {
    attempted: 0,
    created: 0,
    matched: 0,
    alreadyHere: 0,
    skipped: 0,
    failed: 0,
  };
  const ctx = {
    run: deps.run,
    task: deps.task,
    signal: new AbortController().signal,
    working() {},
    settleRunFact: (key, value) => settleRunFact(db, run!.id, key, value),
    async writeBatches(rows, writer, options) {
      const s = await writeBatches(deps, rows, writer, options);
      for (const k of Object.keys(summary) as (keyof WriteSummary)[]) summary[k] += s[k];
      return s;
    },
  } as Pick<
    TaskContext,
    "run" | "task" | "signal" | "working" | "writeBatches" | "settleRunFact"
  > as TaskContext;
  return { ctx, runId: run!.id, summary };
}

/** A window's COPY straight into app.room_events, as logged. */
const DIRECT_COPY =
  'copy "app"."room_events" ("tenant_id", "id", "room_id", "data") from stdin (format binary)';

/** The window upserts into app.room_events logged since `statements` was last emptied. */
// The in-database upsert is inside a statement that counts what it wrote (upsertWindowCounted).
const upsertsLogged = () => statements.filter((s) => s.includes('insert into "app"."room_events"'));

async function landed(runTenant: string, ids: readonly string[]) {
  return database.db.execute<{ id: string; room_id: string; data: unknown }>(sql`
    select id, room_id::text as room_id, data from app.room_events
     where tenant_id = ${runTenant} and id = any(${sql.param([...ids])}::text[]) order by id`);
}

describe("pg-table windows", () => {
  it("cuts a binary COPY stream into tuples, and tells a stream cut mid-row", async () => {
    const db = openDatabase(other.url, { max: 1 });
    try {
      const chunks = await copyOut(
        db.sql,
        `select k::text, null::text, v from (values ('a', 1), ('b', null), ('c', 3)) as x(k, v)`,
      );
      const tuples = splitTuples(chunks, 3);
      expect(tuples.map((t) => [t.key, t.time])).toEqual([
        ["a", null],
        ["b", null],
        ["c", null],
      ]);
      // As the rows came, a row a chunk: every tuple is a view of its chunk, not a copy.
      expect(tuples.every((t) => chunks.some((c) => c.buffer === t.bytes.buffer))).toBe(true);
      const stream = Buffer.concat(chunks);
      expect(() => splitTuples(stream, 2)).toThrow(/3 fields where 2/);
      const cut = stream.subarray(0, stream.length - 6);
      expect(() => splitTuples(cut, 3)).toThrow(TransientError);
      expect(() => splitTuples(cut, 3)).toThrow(/ended mid-row/);
      expect(() => splitTuples([stream.subarray(0, 5)], 3)).toThrow(/binary signature/);
      expect(() => splitTuples([stream, Buffer.from([0])], 3)).toThrow(/after its trailer/);
    } finally {
      await db.close();
    }
  });

  it("reads the same tuples however the stream is cut into chunks", async () => {
    const db = openDatabase(other.url, { max: 1 });
    try {
      const stream = Buffer.concat(
        await copyOut(
          db.sql,
          `select g::text, (timestamptz '2024-01-01' + g * interval '1 s')::text, repeat('x', g), g
             from generate_series(1, 40) g`,
        ),
      );
      const whole = splitTuples(stream, 4).map((t) => [t.key, t.time, t.valuesAt, t.bytes.toString("hex")]);
      expect(whole).toHaveLength(40);
      for (const size of [1, 2, 3, 7, 19, 64, 1_000]) {
        const pieces: Buffer[] = [];
        for (let at = 0; at < stream.length; at += size) pieces.push(stream.subarray(at, at + size));
        const cut = splitTuples(pieces, 4).map((t) => [t.key, t.time, t.valuesAt, t.bytes.toString("hex")]);
        expect(cut).toEqual(whole);
      }
    } finally {
      await db.close();
    }
  });

  it("a window goes to the server in pieces of bounded size that together are the stream, byte for byte", async () => {
    const db = openDatabase(other.url, { max: 1 });
    try {
      // ~1.2 MB of rows, one of them wider than a piece.
      const stream = Buffer.concat(
        await copyOut(
          db.sql,
          `select g::text, null::text, repeat('y', case when g = 7 then 300000 else 2000 end)
             from generate_series(1, 450) g`,
        ),
      );
      const tuples = splitTuples(stream, 3);
      const pieces = [...copyChunks(tuples, { count: () => 3, bytes: (t) => t.bytes, from: () => 2 })];
      expect(Buffer.concat(pieces).equals(stream)).toBe(true);
      expect(pieces.length).toBeGreaterThan(4);
      // Only the piece carrying the one wide row is larger than a piece's size.
      expect(pieces.filter((p) => p.length > COPY_CHUNK_BYTES)).toHaveLength(1);
      // A row written alone (the fallback rewrites a failed window row by row) takes its own size.
      const [alone, ...more] = [
        ...copyChunks(tuples.slice(0, 1), { count: () => 3, bytes: (t) => t.bytes, from: () => 2 }),
      ];
      expect(more).toEqual([]);
      expect(alone!.length).toBe(19 + tuples[0]!.bytes.length + 2);
      expect(alone!.buffer.byteLength).toBeLessThan(COPY_CHUNK_BYTES);
    } finally {
      await db.close();
    }
  });

  it("windows written one after another in pieces used again each land their own rows, byte for byte", async () => {
    await database.sql.unsafe(`create table app.piece_probe (
      tenant_id text not null, id text not null, data text, primary key (tenant_id, id))`);
    const source = openDatabase(other.url, { max: 1 });
    try {
      await source.sql.unsafe(`create schema if not exists src`);
      // ~2 KB a row, every row its own bytes: 1,200 rows are three windows of several pieces each.
      await source.sql.unsafe(`create table src.piece_probe (id text primary key, data text)`);
      await source.sql.unsafe(
        `insert into src.piece_probe
         select $1 || lpad(g::text, 6, '0'), repeat(md5(g::text), 64) from generate_series(1, 1200) g`,
        [makeUlid(FROM).slice(0, 20)],
      );
    } finally {
      await source.close();
    }
    const probe = config({
      table: "src.piece_probe",
      destination: "app.piece_probe",
      mapping: "id=id,data=data",
    });
    const connection = sourceDatabase(other.url);
    const columns = await sourceColumns(connection, probe, '"src"."piece_probe"');
    const shape = await destinationShape(database.db, probe);
    let cursor: { from: number; to: number; lastId?: string } = { from: FROM, to: FROM + HOUR };
    for (let window = 0; window < 3; window++) {
      const page = await readPage(connection, probe, cursor, 400, columns);
      expect(page).toHaveLength(400);
      await database.db.transaction((tx) =>
        copyWindow(
          tx,
          probe,
          shape,
          columns,
          "t",
          page.map((r) => ({ sourceId: r.id, data: r })),
        ),
      );
      cursor = { ...cursor, lastId: page[page.length - 1]!.id };
    }
    const digest = (rows: { d: string }[]) => rows[0]!.d;
    const [landed, read] = await Promise.all([
      database.sql<{ d: string }[]>`
        select md5(string_agg(id || ':' || data, ',' order by id)) as d from app.piece_probe`,
      connection<{ d: string }[]>`
        select md5(string_agg(id || ':' || data, ',' order by id)) as d from src.piece_probe`,
    ]);
    expect(digest(landed)).toBe(digest(read));
  });

  it("a window arrives intact through binary COPY: nulls, empty strings, quotes and a type cast", async () => {
    await database.sql.unsafe(`create table app.window_probe (
      tenant_id text not null, id text not null, note text, data jsonb, n int8, primary key (tenant_id, id))`);
    const source = openDatabase(other.url, { max: 1 });
    try {
      await source.sql.unsafe(`create schema if not exists src`);
      // n is int4 at the source and int8 at the destination: staged as int4, cast through text.
      await source.sql.unsafe(`create table src.probe (id text primary key, note text, data jsonb, n int4)`);
      await source.sql.unsafe(
        `insert into src.probe values
        ($1, 'quotes " and \\ backslashes, ''single'' too', '{"k": "v \\" q"}', 1),
        ($2, null, null, null), ($3, '', '[]', -7), ($4, 'a record separator \x1e inside', '{"k": 1}', 2)`,
        [makeUlid(FROM), makeUlid(FROM + 1), makeUlid(FROM + 2), makeUlid(FROM + 3)],
      );
    } finally {
      await source.close();
    }
    const probe = config({
      table: "src.probe",
      destination: "app.window_probe",
      mapping: "id=id,note=note,data=data,n=n",
    });
    const connection = sourceDatabase(other.url);
    const columns = await sourceColumns(connection, probe, '"src"."probe"');
    expect(columns.stageTypes).toEqual([
      '"pg_catalog"."text"',
      '"pg_catalog"."text"',
      '"pg_catalog"."jsonb"',
      '"pg_catalog"."int4"',
    ]);
    const page = await readPage(connection, probe, { from: FROM, to: FROM + HOUR }, 10, columns);
    const shape = await destinationShape(database.db, probe);
    statements.length = 0;
    const results = await database.db.transaction((tx) =>
      copyWindow(
        tx,
        probe,
        shape,
        columns,
        "t",
        page.map((r) => ({ sourceId: r.id, data: r })),
      ),
    );
    expect(results).toEqual(page.map(() => ({ action: "upserted", replaced: false })));
    expect(
      statements.some((s) => s.startsWith("copy pg_temp.drover_stage_") && s.includes("format binary")),
    ).toBe(true);
    expect(statements.some((s) => s.includes('s.c3::text::"pg_catalog"."int8"') && s.includes("s.c2,"))).toBe(
      true,
    );
    const back = await database.db.execute<{ note: string | null; data: string | null; n: string | null }>(
      sql`select note, data::text as data, n::text as n from app.window_probe order by id`,
    );
    expect(back).toEqual([
      { note: "quotes \" and \\ backslashes, 'single' too", data: '{"k": "v \\" q"}', n: "1" },
      { note: null, data: null, n: null },
      { note: "", data: "[]", n: "-7" },
      { note: "a record separator \x1e inside", data: '{"k": 1}', n: "2" },
    ]);
  });

  it("a malformed row in a binary-COPY window loses only itself: the window is written again row by row", async () => {
    const ids = await sourceEvents(other.url, "events_malformed", 30);
    const cfg = config({ table: "src.events_malformed" });
    const connection = sourceDatabase(other.url);
    const columns = await sourceColumns(connection, cfg, '"src"."events_malformed"');
    const page = await readPage(connection, cfg, { from: FROM, to: FROM + HOUR }, 100, columns);
    expect(page.length).toBe(30);
    // Row 12's room_id (a uuid, 16 bytes in binary) claims to be 17 bytes long: the server refuses
    // the COPY itself (incorrect binary data format), the direct one into the destination and then
    // the row's own into the staging table, not a value cast after it. Fields: the key and the time
    // (null here) as text, then id, room_id, data.
    const bad = page[12]!;
    const bytes = Buffer.from(bad.tuple!.bytes);
    const roomField = 2 + (4 + bad.id.length) + 4 + (4 + bad.id.length);
    expect(bytes.readInt32BE(roomField)).toBe(16);
    bytes.writeInt32BE(17, roomField);
    page[12] = { ...bad, tuple: { ...bad.tuple!, bytes } };
    const { ctx, runId, summary } = await slotTask(other.url, { table: "src.events_malformed" });
    const shape = await destinationShape(database.db, cfg);
    statements.length = 0;
    await ctx.writeBatches(
      page.map((r) => ({ sourceId: r.id, data: r })),
      {
        writeBatch: (tx, rows) => copyWindow(tx, cfg, shape, columns, "t-writes", rows),
        writeRow: (tx, row, sourceId) =>
          copyRow(tx, cfg, shape, columns, "t-writes", { sourceId, data: row }),
      },
      { windowSize: 500, cursorAfter: (r) => ({ from: FROM, to: FROM + HOUR, lastId: r.sourceId }) },
    );
    expect(summary).toMatchObject({ attempted: 30, failed: 1, created: 29 });
    const notes = await database.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${runId}::uuid and level = 'error'`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual([bad.id]);
    expect(notes[0]!.reason).toMatch(/SQLSTATE 22/);
    expect((await landed("t-writes", ids)).map((r) => r.id)).toEqual(ids.filter((id) => id !== bad.id));
    // The checkpoint moved past the whole window, the refused row included.
    expect(ctx.task.cursor.lastId).toBe(ids[ids.length - 1]);
  });

  it("streamed, a value the destination's type refuses loses only its row, and the slot still finishes", async () => {
    const ids = await sourceEvents(other.url, "events_castfail", 40, "text");
    const bad = ids[23]!;
    const db = openDatabase(other.url, { max: 1 });
    await db.sql.unsafe(`update src.events_castfail set room_id = 'not a uuid' where id = $1`, [bad]);
    await db.close();
    const { ctx, runId, summary } = await slotTask(other.url, {
      table: "src.events_castfail",
      windowSize: "20",
    });
    statements.length = 0;
    await pgTableProvider.runTask(ctx);
    // room_id is text at the source: staged as text, cast to uuid by the upsert, which fails the window.
    expect(statements.some((s) => s.includes('s.c1::text::"pg_catalog"."uuid"'))).toBe(true);
    expect(summary).toMatchObject({ attempted: 40, failed: 1, skipped: 0, created: 39 });
    const notes = await database.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${runId}::uuid and level = 'error'`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual([bad]);
    expect(notes[0]!.reason).toMatch(/uuid/);
    expect((await landed("t-writes", ids)).map((r) => r.id)).toEqual(ids.filter((id) => id !== bad));
    expect(ctx.task.cursor.lastId).toBe(ids[ids.length - 1]);
  });

  it("a source in the product database is copied by the server, every value exactly as it is", async () => {
    const ids = await sourceEvents(testDb.url, "events", 1_200);
    const { ctx, runId, summary } = await slotTask(testDb.url, {});
    statements.length = 0;
    await pgTableProvider.runTask(ctx);

    const copies = upsertsLogged();
    // 1,200 rows: a first page of the streamed size for rows of a width not known yet (250: the
    // path is not known before the first window, copy-sizes.ts), one window, which settles it; then
    // the rest, read while it was written, one window of the in-database size.
    expect(copies.length).toBe(2);
    expect(copies.every((s) => s.includes('from "src"."events" s'))).toBe(true);
    expect(settledSharing(testDb.url, config())).toBe(true);
    expect(await readRunFact(database.db, runId, "pg-table.copy")).toBe("in-database");
    expect(summary).toMatchObject({ attempted: 1_200, failed: 0, skipped: 0 });
    const [diff] = await database.db.execute<{ n: number }>(sql`
      select count(*)::int as n from (
        select id, room_id, data from src.events
        except select id, room_id, data from app.room_events where tenant_id = 't-writes') d`);
    expect(diff!.n).toBe(0);
    expect((await landed("t-writes", ids)).length).toBe(1_200);
    // The checkpoint is the last key the last window copied.
    expect(ctx.task.cursor.lastId).toBe(ids[ids.length - 1]);
  });

  it("slotted by a timestamp column, the in-database copy walks (time, id) and copies every row once", async () => {
    await database.sql.unsafe(
      `create table src.timed (id bigint primary key, at timestamptz not null, data jsonb not null)`,
    );
    await database.sql.unsafe(
      `create table app.timed_copy (id bigint primary key, at timestamptz not null, data jsonb not null)`,
    );
    // 900 rows on 30 instants: every page (70) and window (25) boundary falls inside a tie.
    await database.sql.unsafe(
      `insert into src.timed select i, $1::timestamptz + make_interval(secs => (i % 30) * 60), jsonb_build_object('i', i)
         from generate_series(1, 900) i`,
      [new Date(FROM).toISOString()],
    );
    const { ctx, summary } = await slotTask(testDb.url, {
      table: "src.timed",
      destination: "app.timed_copy",
      tenantColumn: "",
      timeColumn: "at",
      mapping: "id=id,at=at,data=data",
      pageSize: "70",
      windowSize: "25",
    });
    statements.length = 0;
    await pgTableProvider.runTask(ctx);
    // Each window by its span of (time, id), ties at its edges included: none fell back to its keys.
    const ofTimed = statements.filter((s) => s.includes('from "src"."timed" s'));
    expect(ofTimed.filter((s) => s.includes("hashtextextended")).length).toBeGreaterThan(30);
    expect(ofTimed.filter((s) => s.includes("::bigint[]"))).toEqual([]);
    expect(summary).toMatchObject({ attempted: 900, failed: 0, alreadyHere: 0 });
    const [diff] = await database.db.execute<{ n: number; copied: number }>(sql`
      select (select count(*)::int from (select * from src.timed except select * from app.timed_copy) d) as n,
             (select count(*)::int from app.timed_copy) as copied`);
    expect(diff).toEqual({ n: 0, copied: 900 });
  });

  it("a source in another database of the same server travels through the worker", async () => {
    const ids = await sourceEvents(other.url, "events", 300);
    const { ctx, runId, summary } = await slotTask(other.url, {});
    statements.length = 0;
    await pgTableProvider.runTask(ctx);
    // A first copy: the windows go straight into the destination by COPY, no upsert. Two: the
    // first page is 250 rows while the rows' width is not known (copy-sizes.ts), the second the rest.
    expect(statements.filter((s) => s.startsWith(DIRECT_COPY)).length).toBe(2);
    expect(upsertsLogged()).toEqual([]);
    expect(settledSharing(other.url, config())).toBe(false);
    expect(await readRunFact(database.db, runId, "pg-table.copy")).toBe("streamed");
    expect(summary).toMatchObject({ attempted: 300, created: 300, failed: 0 });
    expect((await landed("t-writes", ids)).length).toBe(300);
  });

  it("a streamed page is written as one window though the worker took on more copies since it was read", async () => {
    const ids = await sourceEvents(other.url, "events_crowded", 600);
    const { ctx, summary } = await slotTask(other.url, { table: "src.events_crowded" });
    // While the first page is written, 999 more copies start on this worker: the second page (the
    // other 350 rows, read meanwhile for a lone copy) would be cut into windows of tens of rows
    // if sized for them (16 KiB a copy).
    const others: (() => void)[] = [];
    const crowded = {
      ...ctx,
      writeBatches: ((rows, writer, options) => {
        while (others.length < 999) others.push(streamingTask());
        return ctx.writeBatches(rows, writer, options);
      }) as TaskContext["writeBatches"],
    };
    statements.length = 0;
    try {
      await pgTableProvider.runTask(crowded);
    } finally {
      for (const leave of others) leave();
    }
    // Two pages (250 rows while the rows' width is unknown, then the rest), two windows.
    expect(statements.filter((s) => s.startsWith(DIRECT_COPY)).length).toBe(2);
    expect(summary).toMatchObject({ attempted: 600, created: 600, failed: 0 });
    expect((await landed("t-writes", ids)).length).toBe(600);
    // The checkpoint is the last key the committed windows wrote.
    const [task] = await database.db.execute<{ last_id: string }>(sql`
      select cursor->>'lastId' as last_id from drover.tasks where id = ${ctx.task.id}`);
    expect(task!.last_id).toBe(ids.at(-1));
  });

  it("a streamed slot killed after its first window resumes from the committed last_id: every row once, none read twice", async () => {
    const ids = await sourceEvents(other.url, "events_killed", 600);
    const { ctx, summary } = await slotTask(other.url, { table: "src.events_killed" });
    let windows = 0;
    const killed = {
      ...ctx,
      writeBatches: (async (rows, writer, options) => {
        if (windows++ === 1) throw new TransientError("killed mid-slot");
        return ctx.writeBatches(rows, writer, options);
      }) as TaskContext["writeBatches"],
    };
    await expect(pgTableProvider.runTask(killed)).rejects.toThrow(/killed mid-slot/);
    // The retry starts from what the database says, as a new attempt would.
    const [row] = await database.db.execute<{ cursor: Record<string, unknown>; processed_offset: number }>(
      sql`select cursor, processed_offset from drover.tasks where id = ${ctx.task.id}`,
    );
    expect(row!.cursor.lastId).toBe(ids[249]);
    ctx.task.cursor = row!.cursor;
    ctx.task.processedOffset = row!.processed_offset;
    await pgTableProvider.runTask(ctx);
    expect(summary).toMatchObject({ attempted: 600, created: 600, alreadyHere: 0, failed: 0 });
    expect((await landed("t-writes", ids)).map((r) => r.id)).toEqual(ids);
  });

  it("streamed again over rows already there, the direct COPY gives way to the upsert: already here, nothing failed", async () => {
    const ids = await sourceEvents(other.url, "events_again", 120);
    const first = await slotTask(other.url, { table: "src.events_again" });
    await pgTableProvider.runTask(first.ctx);
    expect(first.summary).toMatchObject({ attempted: 120, created: 120 });
    const altered = ids.slice(40, 45);
    await database.sql.unsafe(
      `update app.room_events set data = '{}' where tenant_id = 't-writes' and id = any($1::text[])`,
      [altered],
    );
    const again = await slotTask(other.url, { table: "src.events_again" });
    statements.length = 0;
    await pgTableProvider.runTask(again.ctx);
    expect(statements.some((s) => s.startsWith(DIRECT_COPY))).toBe(true);
    expect(statements.some((s) => s.startsWith("copy pg_temp.drover_stage_"))).toBe(true);
    expect(upsertsLogged().length).toBe(1);
    expect(again.summary).toMatchObject({ attempted: 120, created: 0, alreadyHere: 120, failed: 0 });
    // The upsert overwrote what was there with the source's values.
    const back = await landed("t-writes", altered);
    expect(back.map((r) => r.data)).not.toContainEqual({});
    expect(back.length).toBe(5);
  });

  it("inDatabaseCopy=off keeps the rows in the worker even when the source is in the same database", async () => {
    await sourceEvents(testDb.url, "events_off", 50);
    const { ctx, summary } = await slotTask(testDb.url, { table: "src.events_off", inDatabaseCopy: "off" });
    statements.length = 0;
    await pgTableProvider.runTask(ctx);
    expect(statements.filter((s) => s.startsWith(DIRECT_COPY)).length).toBe(1);
    expect(summary).toMatchObject({ attempted: 50, failed: 0 });
  });

  it("a writer role that may not read the source table does not copy in the database", async () => {
    await sourceEvents(testDb.url, "events_private", 1);
    const role = `drover_probe_${Math.random().toString(36).slice(2, 8)}`;
    await database.sql.unsafe(`create role ${role}`);
    try {
      await database.sql.unsafe(`grant usage on schema src, app to ${role}`);
      const verdict = await database.db.transaction(async (tx) => {
        await tx.execute(sql.raw(`set local role ${role}`));
        return sharesDatabase(
          tx,
          sourceDatabase(testDb.url),
          testDb.url,
          config({ table: "src.events_private" }),
        );
      });
      expect(verdict).toBe(false);
    } finally {
      await database.sql.unsafe(`revoke all on schema src, app from ${role}`);
      await database.sql.unsafe(`drop role ${role}`);
    }
  });

  it("a source role barred from pg_locks streams instead of failing the window", async () => {
    // pg_catalog's views are per database: this revoke touches the test database alone.
    await sourceEvents(testDb.url, "events_locks", 1);
    const role = `drover_nolocks_${Math.random().toString(36).slice(2, 8)}`;
    await database.sql.unsafe(`create role ${role} login`);
    await database.sql.unsafe(`revoke select on pg_catalog.pg_locks from public`);
    const url = testDb.url.replace("postgres://postgres@", `postgres://${role}@`);
    try {
      const verdict = await database.db.transaction((tx) =>
        sharesDatabase(tx, sourceDatabase(url), url, config({ table: "src.events_locks" })),
      );
      expect(verdict).toBe(false);
    } finally {
      await closePgTableSources();
      await database.sql.unsafe(`grant select on pg_catalog.pg_locks to public`);
      await database.sql.unsafe(`drop role ${role}`);
    }
  });

  it("a key deleted from the source after its page was read is skipped with a reason, not failed", async () => {
    const [kept, gone] = await sourceEvents(testDb.url, "events_gone", 2);
    const cfg = config({ table: "src.events_gone" });
    await database.sql.unsafe(`delete from src.events_gone where id = $1`, [gone!]);
    const results = await database.db.transaction(async (tx) => {
      const shape = await destinationShape(tx, cfg);
      const plan = await inDatabasePlan(tx, cfg, shape);
      return copyInDatabase(tx, cfg, shape, plan, "t-gone", [kept!, gone!]);
    });
    expect(results).toEqual([
      { action: "upserted", replaced: false },
      { action: "skipped", reason: "no longer in the source table when its window was copied" },
    ]);
    // The window again (a retry): the row is overwritten and counted as already here.
    const again = await database.db.transaction(async (tx) => {
      const shape = await destinationShape(tx, cfg);
      const plan = await inDatabasePlan(tx, cfg, shape);
      return copyInDatabase(tx, cfg, shape, plan, "t-gone", [kept!, gone!]);
    });
    expect(again).toEqual([
      { action: "upserted", replaced: true },
      { action: "skipped", reason: "no longer in the source table when its window was copied" },
    ]);
  });

  it("an in-database window is copied by its span, and by key when the span no longer holds exactly its page's keys", async () => {
    const ids = await sourceEvents(testDb.url, "events_span", 6);
    const cfg = config({ table: "src.events_span" });
    const span = (keys: string[]) => ({
      first: { id: keys[0]!, time: null },
      last: { id: keys[keys.length - 1]!, time: null },
    });
    const copy = (tenant: string, keys: string[]) =>
      database.db.transaction(async (tx) => {
        const shape = await destinationShape(tx, cfg);
        const plan = await inDatabasePlan(tx, cfg, shape);
        return copyInDatabase(tx, cfg, shape, plan, tenant, keys, span(keys));
      });
    const ofTable = (q: string) => q.includes('"src"."events_span" s');
    const bySpan = () => statements.filter((q) => ofTable(q) && q.includes("hashtextextended")).length;
    const byKey = () => statements.filter((q) => ofTable(q) && q.includes("= any(")).length;

    // The page as read: written by its span alone, no statement by key.
    statements.length = 0;
    const page = ids.slice(0, 4);
    expect(await copy("t-span", page)).toEqual(page.map(() => ({ action: "upserted", replaced: false })));
    expect([bySpan(), byKey()]).toEqual([1, 0]);
    expect((await landed("t-span", ids)).map((r) => r.id)).toEqual(page);

    // A row added inside the span after the page was read: the window is the page's keys, by key,
    // and the newcomer is not written (the next read of the slot will count it).
    const between = makeUlid(FROM + 1_500);
    await database.sql.unsafe(
      `insert into src.events_span select $1, room_id, data from src.events_span where id = $2`,
      [between, ids[1]!],
    );
    statements.length = 0;
    expect(await copy("t-added", page)).toEqual(page.map(() => ({ action: "upserted", replaced: false })));
    expect(byKey()).toBe(1);
    expect((await landed("t-added", [...ids, between])).map((r) => r.id)).toEqual(page);

    // A row gone from inside the span: by key again, and it is skipped with its reason.
    await database.sql.unsafe(`delete from src.events_span where id = $1`, [ids[2]!]);
    statements.length = 0;
    const results = await copy("t-gone-span", page);
    expect(results[2]).toEqual({
      action: "skipped",
      reason: "no longer in the source table when its window was copied",
    });
    expect(byKey()).toBe(1);
  });

  it("keys of any text (multi-byte, colons, commas) still match their span's check: the window goes by span", async () => {
    const base = makeUlid(FROM);
    await database.sql.unsafe(
      `create table src.odd_keys (id text primary key, room_id uuid, data jsonb not null)`,
    );
    await database.sql.unsafe(
      `insert into src.odd_keys select k, md5(k)::uuid, '{}'::jsonb from unnest($1::text[]) as k`,
      [[`${base}é:1`, `${base}a,b`, `${base}日本`, `${base}3:x:y`, `${base}`]],
    );
    // The page in the walk's order, as the server sorts it.
    const page = (await database.sql<{ id: string }[]>`select id from src.odd_keys order by id`).map(
      (r) => r.id,
    );
    const cfg = config({ table: "src.odd_keys" });
    statements.length = 0;
    const results = await database.db.transaction(async (tx) => {
      const shape = await destinationShape(tx, cfg);
      const plan = await inDatabasePlan(tx, cfg, shape);
      const span = { first: { id: page[0]!, time: null }, last: { id: page[page.length - 1]!, time: null } };
      return copyInDatabase(tx, cfg, shape, plan, "t-odd", page, span);
    });
    expect(results).toEqual(page.map(() => ({ action: "upserted", replaced: false })));
    const ofTable = statements.filter((q) => q.includes('"src"."odd_keys" s'));
    expect(ofTable.filter((q) => q.includes("hashtextextended")).length).toBe(1);
    expect(ofTable.filter((q) => q.includes("= any("))).toEqual([]);
    expect((await landed("t-odd", page)).map((r) => r.id)).toEqual(
      [...page].sort((a, b) => (a < b ? -1 : 1)),
    );
  });

  it("a run's later tasks in the process read the destination's catalog no more, until one of them fails", async () => {
    await sourceEvents(testDb.url, "events_known", 30);
    const settings = { table: "src.events_known" };
    const first = await slotTask(testDb.url, settings);
    const catalogReads = () => statements.filter((q) => q.includes("information_schema.columns")).length;
    statements.length = 0;
    await pgTableProvider.runTask(first.ctx);
    expect(catalogReads()).toBe(1);
    // Another task of the same run (the same slot again: every row is already here).
    const second = await slotTask(testDb.url, settings, first.runId);
    statements.length = 0;
    await pgTableProvider.runTask(second.ctx);
    expect(catalogReads()).toBe(0);
    expect([first.summary, second.summary]).toMatchObject([
      { attempted: 30, created: 30, failed: 0 },
      { attempted: 30, alreadyHere: 30, failed: 0 },
    ]);
    // A task that fails (here stopped before its first page) forgets them: the retry reads again.
    const third = await slotTask(testDb.url, settings, first.runId);
    const stopped = new AbortController();
    stopped.abort();
    await expect(pgTableProvider.runTask({ ...third.ctx, signal: stopped.signal })).rejects.toThrow();
    statements.length = 0;
    await pgTableProvider.runTask(third.ctx);
    expect(catalogReads()).toBe(1);
    expect(third.summary).toMatchObject({ attempted: 30, alreadyHere: 30, failed: 0 });
  });

  it("an in-database window whose keys do not add up to the rows written and missing fails instead of miscounting", async () => {
    const [key] = await sourceEvents(testDb.url, "events_twice", 1);
    const cfg = config({ table: "src.events_twice" });
    const attempt = database.db.transaction(async (tx) => {
      const shape = await destinationShape(tx, cfg);
      const plan = await inDatabasePlan(tx, cfg, shape);
      return copyInDatabase(tx, cfg, shape, plan, "t-twice", [key!, key!]);
    });
    await expect(attempt).rejects.toThrow(/of 2 keys wrote 1 rows and found 0 missing/);
  });

  it("a column of another type is cast through text as in the worker, and a bad value loses only its row", async () => {
    const ids = await sourceEvents(testDb.url, "events_text", 40, "text");
    const bad = ids[17]!;
    await database.sql.unsafe(`update src.events_text set room_id = 'not a uuid' where id = $1`, [bad]);
    const { ctx, runId, summary } = await slotTask(testDb.url, {
      table: "src.events_text",
      windowSize: "20",
    });
    statements.length = 0;
    await pgTableProvider.runTask(ctx);
    expect(statements.some((s) => s.includes('s."room_id"::text::"pg_catalog"."uuid"'))).toBe(true);
    expect(summary).toMatchObject({ attempted: 40, failed: 1, skipped: 0 });
    const notes = await database.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${runId}::uuid and level = 'error'`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual([bad]);
    expect(notes[0]!.reason).toMatch(/uuid/);
    const rows = await landed("t-writes", ids);
    expect(rows.map((r) => r.id)).toEqual(ids.filter((id) => id !== bad));
  });
});
