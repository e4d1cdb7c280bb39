import type { Database } from "@drover/db";
import { EMPTY_CRM_SANDBOX, generateRoomEvents } from "@drover/local-cluster";
import { openBenchCluster, untilVerified } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * table_rows_per_s, table_vs_naive, table_vs_insert_select: one source table of room events
 * (ULID id, room id, JSON payloads of ~0.5-2 KB; BENCH_TABLE_ROWS, default 1,000,000) copied three
 * ways, side by side, on one database:
 *
 * - Drover: the pg-table source on a cluster of processes (1 coordinator, 2 workers × lane 4),
 *   hourly slots, into app.room_events. Time is the run's started_at → finished_at.
 * - naive: the obvious first script, one loop: a keyset page of 1,000 (newest first), written in
 *   batches of 25 rows, each batch one multi-row upsert in its own transaction; nothing parallel.
 * - INSERT … SELECT … ON CONFLICT: one statement, the server copying its own table — the ceiling.
 *
 * The source lives in the same database as the destination, in schema `bench_source`: a single
 * statement can only read across databases through dblink or postgres_fdw, which this server does
 * not have, and the ceiling must not be charged for a network hop the others do not pay either.
 * Drover reads it through a connection string all the same, as it would read another database.
 * Each contender writes an empty table of app.room_events' shape (the naive loop and the ceiling
 * into copies in schema `bench_copy`), after one warm-up scan of the source.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;
const HOUR = 3_600_000;
const SPAN_HOURS = 48;
const NAIVE_PAGE = 1_000;
const NAIVE_BATCH = 25;

type Sql = Database["sql"];

/** BENCH_TABLE_ROWS if set, else 1,000,000 rows (100,000 under --quick). */
export function tableRows(ctx: ScenarioContext): number {
  const n = Number(process.env.BENCH_TABLE_ROWS ?? scaled(ctx, 1_000_000));
  if (!Number.isInteger(n) || n < 1) throw new Error("BENCH_TABLE_ROWS must be a positive integer");
  return n;
}

const log = (line: string) => process.stderr.write(`[bench] table: ${line}\n`);

export const tableCopyScenario: Scenario = {
  name: "table",
  selects: [
    "table_rows_per_s",
    "table_vs_naive",
    "table_vs_insert_select",
    "table_streamed_rows_per_s",
    "table_streamed_vs_naive",
  ],
  async run(ctx): Promise<ScenarioResult> {
    const rows = tableRows(ctx);
    const bench = await openBenchCluster({
      name: "table",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox: { ...EMPTY_CRM_SANDBOX },
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    try {
      const sql = bench.database.sql;
      const to = Date.parse("2024-10-20T00:00:00Z");
      const from = to - SPAN_HOURS * HOUR;
      const g0 = performance.now();
      await generateRoomEvents(sql, {
        schema: "bench_source",
        rows,
        from: new Date(from),
        to: new Date(to),
        seed: "bench",
        onProgress: (done, total) => {
          if (done === total || done % 250_000 === 0) log(`generated ${done}/${total}`);
        },
      });
      const [source] = await sql<{ n: number; bytes: string }[]>`
        select count(*)::int as n, pg_size_pretty(pg_total_relation_size('bench_source.room_events')) as bytes
          from bench_source.room_events`;
      log(
        `source: ${source!.n} rows, ${source!.bytes}, in ${((performance.now() - g0) / 1000).toFixed(1)} s`,
      );
      await sql`create schema bench_copy`;
      await sql`create table bench_copy.naive_events (like app.room_events including all)`;
      await sql`create table bench_copy.ceiling_events (like app.room_events including all)`;
      await sql`checkpoint`;
      await sql`select count(*), sum(length(data::text)) from bench_source.room_events`;

      // Drover twice on the same cluster: rows streamed through the workers (as from any other
      // database), then the default, which finds the source in its own database and copies each
      // window inside it. The destination is emptied in between, and the first run's automatic
      // verification is let finish, so neither run shares the machine with the other's work.
      const droverRun = async (tenantId: string, extra: Record<string, string>) => {
        await sql`truncate app.room_events`;
        await sql`checkpoint`;
        const outcome = await bench.runToEnd(
          {
            tenantId,
            sourceAccount: `bench-table-${tenantId}`,
            kinds: [],
            settings: {
              table: "bench_source.room_events",
              destination: "app.room_events",
              tenantColumn: "tenant_id",
              mapping: "id=id,room_id=room_id,data=data",
              from: new Date(from).toISOString(),
              to: new Date(to).toISOString(),
              ...extra,
            },
            source: { name: "pg-table", baseUrl: "", apiToken: bench.testDb.url },
          },
          1_800_000,
        );
        const seconds = (outcome.finishedAt - outcome.startedAt) / 1000;
        const [landed] = await sql<{ n: number }[]>`
          select count(*)::int as n from app.room_events where tenant_id = ${tenantId}`;
        if (landed!.n !== source!.n) throw new Error(`Drover landed ${landed!.n} of ${source!.n} rows`);
        await untilVerified(sql, outcome.run.id);
        return seconds;
      };
      log("Drover, streamed through the workers (inDatabaseCopy=off)");
      const streamedSeconds = await droverRun("bench-streamed", { inDatabaseCopy: "off" });
      log(`Drover streamed: ${streamedSeconds.toFixed(1)} s`);
      log("Drover, in-database copy (the default for a source in the product database)");
      const droverSeconds = await droverRun("bench-drover", {});
      log(`Drover in-database: ${droverSeconds.toFixed(1)} s`);
      await bench.stopAll();
      await sql`checkpoint`;

      log("naive: one loop, batches of 25");
      const naive = await naiveLoop(sql, "bench-naive");
      if (naive.rows !== source!.n)
        throw new Error(`the naive loop copied ${naive.rows} of ${source!.n} rows`);
      log(`naive: ${naive.seconds.toFixed(1)} s`);
      await sql`checkpoint`;

      log("INSERT … SELECT … ON CONFLICT");
      const c0 = performance.now();
      const [ceilingRows] = await sql<{ n: number }[]>`
        with copied as (
          insert into bench_copy.ceiling_events (tenant_id, id, room_id, data)
          select 'bench-ceiling', id, room_id, data from bench_source.room_events
          on conflict (tenant_id, id) do update set room_id = excluded.room_id, data = excluded.data
          returning 1)
        select count(*)::int as n from copied`;
      const ceilingSeconds = (performance.now() - c0) / 1000;
      log(`INSERT … SELECT: ${ceilingSeconds.toFixed(1)} s`);

      const drover = source!.n / droverSeconds;
      const streamed = source!.n / streamedSeconds;
      const naiveRate = naive.rows / naive.seconds;
      const ceiling = ceilingRows!.n / ceilingSeconds;
      return {
        figures: {
          table_rows_per_s: drover,
          table_vs_naive: drover / naiveRate,
          table_vs_insert_select: drover / ceiling,
          table_streamed_rows_per_s: streamed,
          table_streamed_vs_naive: streamed / naiveRate,
        },
        settings: {
          rows,
          spanHours: SPAN_HOURS,
          slotWidth: "1h",
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          pgTable: { pageSize: 1000, windowSize: 500 },
          naive: { page: NAIVE_PAGE, batch: NAIVE_BATCH },
          sourceBytes: source!.bytes,
        },
        details: {
          drover: {
            rows: source!.n,
            seconds: droverSeconds,
            rowsPerSecond: drover,
            logs: bench.cluster.logDir,
          },
          droverStreamed: { rows: source!.n, seconds: streamedSeconds, rowsPerSecond: streamed },
          naive: { ...naive, rowsPerSecond: naiveRate },
          insertSelect: { rows: ceilingRows!.n, seconds: ceilingSeconds, rowsPerSecond: ceiling },
        },
      };
    } finally {
      await bench.close();
    }
  },
};

/**
 * Seed 003's naive migrator, on Postgres: newest first by keyset, pages of 1,000, each page written
 * in batches of 25 (the DynamoDB BatchWriteItem limit it was built around), one upsert per batch in
 * its own transaction. Values travel as text and are cast back, as Drover's writer does.
 */
async function naiveLoop(sql: Sql, tenantId: string): Promise<{ rows: number; seconds: number }> {
  const started = performance.now();
  let before: string | null = null;
  let rows = 0;
  for (;;) {
    const page: { id: string; room_id: string; data: string }[] = await sql<
      { id: string; room_id: string; data: string }[]
    >`
      select id, room_id::text as room_id, data::text as data from bench_source.room_events
       where ${before}::text is null or id < ${before}
       order by id desc limit ${NAIVE_PAGE}`;
    if (page.length === 0) break;
    for (let i = 0; i < page.length; i += NAIVE_BATCH) {
      const batch = page.slice(i, i + NAIVE_BATCH);
      await sql`
        insert into bench_copy.naive_events (tenant_id, id, room_id, data)
        select ${tenantId}, u.id, u.room_id::uuid, u.data::jsonb
          from unnest(${batch.map((r) => r.id)}::text[], ${batch.map((r) => r.room_id)}::text[], ${batch.map((r) => r.data)}::text[])
            as u(id, room_id, data)
        on conflict (tenant_id, id) do update set room_id = excluded.room_id, data = excluded.data`;
    }
    rows += page.length;
    before = page[page.length - 1]!.id;
  }
  return { rows, seconds: (performance.now() - started) / 1000 };
}
