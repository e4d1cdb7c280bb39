import { readFileSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import type { Database } from "@drover/db";
import {
  createSourceDatabase,
  EMPTY_CRM_SANDBOX,
  generateRoomEvents,
  type SourceDatabase,
} from "@drover/local-cluster";
import { openBenchCluster, untilVerified } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * The pg-table figures: one source table of room events (ULID id, room id, JSON payloads of ~0.5-2
 * KB; BENCH_TABLE_ROWS, default 1,000,000, a tenth under --quick) in a database of its own, as a
 * real source on another server would be, copied these ways:
 *
 * - the pipe (copy_pipe_rows_per_s): `COPY (select …) TO STDOUT (FORMAT binary)` out of the source
 *   database piped straight into `COPY … FROM STDIN (FORMAT binary)` of an empty table of the same
 *   shape in the scenario's database: the protocol's own speed, the limit for a streamed copy. That
 *   table, bench_source.room_events, is then the source of the in-database contenders.
 * - Drover streamed (table_streamed_*): the pg-table source on a cluster of processes (1 coordinator,
 *   2 workers × lane 4), hourly slots, reading the source database, into app.room_events.
 * - Drover in-database (table_rows_per_s, table_vs_*): the same from bench_source.room_events, which
 *   the run finds in its own database and copies window by window inside it.
 * - naive: the obvious first script, one loop: a keyset page of 1,000 (newest first), written in
 *   batches of 25 rows, each batch one multi-row upsert in its own transaction; nothing parallel.
 * - INSERT … SELECT … ON CONFLICT: one statement, the server copying its own table — the ceiling of
 *   the in-database copy.
 * - memory (table_worker_rss_mb): one worker alone copies BENCH_TABLE_RSS_ROWS (default 5,000,000,
 *   a tenth under --quick) streamed from the source database; its peak RSS (VmHWM) is the figure.
 *
 * Drover's time is the run's started_at → finished_at; each contender writes an empty table.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;
const HOUR = 3_600_000;
const SPAN_HOURS = 48;
const NAIVE_PAGE = 1_000;
const NAIVE_BATCH = 25;
const SHAPE = "(id text primary key, room_id uuid not null, data jsonb not null)";

type Sql = Database["sql"];

/** A size from the environment variable `name` if set, else `full` at the context's scale. */
function rowsSetting(name: string, full: number, ctx: ScenarioContext): number {
  const value = process.env[name];
  const n = value === undefined ? scaled(ctx, full) : Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}

/** BENCH_TABLE_ROWS if set, else 1,000,000 rows (100,000 under --quick). */
export function tableRows(ctx: ScenarioContext): number {
  return rowsSetting("BENCH_TABLE_ROWS", 1_000_000, ctx);
}

/** BENCH_TABLE_RSS_ROWS if set, else 5,000,000 rows (500,000 under --quick). */
export function memoryRows(ctx: ScenarioContext): number {
  return rowsSetting("BENCH_TABLE_RSS_ROWS", 5_000_000, ctx);
}

const log = (line: string) => process.stderr.write(`[bench] table: ${line}\n`);

function statusMb(pid: number, field: "VmHWM" | "VmRSS"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
  if (!kb) throw new Error(`/proc/${pid}/status has no ${field} line`);
  return Number(kb[1]) / 1024;
}

/** A process's peak resident set (VmHWM in /proc/<pid>/status), in MB. */
export const peakRssMb = (pid: number) => statusMb(pid, "VmHWM");
const residentMb = (pid: number) => statusMb(pid, "VmRSS");

/**
 * The limit: the source table piped, binary COPY to binary COPY, into an empty table of the same
 * shape in `into`'s database, through postgres.js streams (measured against psql's own pipe on
 * 100,000 rows: the same rate within noise).
 */
async function copyPipe(from: Sql, into: Sql, table: string): Promise<{ rows: number; seconds: number }> {
  const started = performance.now();
  const out = await from
    .unsafe(`copy (select id, room_id, data from ${table}) to stdout (format binary)`)
    .readable();
  const sink = await into.unsafe(`copy ${table} from stdin (format binary)`).writable();
  await pipeline(out, sink);
  const seconds = (performance.now() - started) / 1000;
  const [copied] = await into.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`);
  return { rows: copied!.n, seconds };
}

export const tableCopyScenario: Scenario = {
  name: "table",
  selects: [
    "table_rows_per_s",
    "table_vs_naive",
    "table_vs_insert_select",
    "table_streamed_rows_per_s",
    "table_streamed_vs_naive",
    "copy_pipe_rows_per_s",
    "table_streamed_vs_copy_pipe",
    "table_worker_rss_mb",
  ],
  async run(ctx): Promise<ScenarioResult> {
    const rows = tableRows(ctx);
    const rssRows = memoryRows(ctx);
    const bench = await openBenchCluster({
      name: "table",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox: { ...EMPTY_CRM_SANDBOX },
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    let source: SourceDatabase | undefined;
    try {
      const sql = bench.database.sql;
      source = await createSourceDatabase(bench.testDb.url.replace(/\/[^/]*$/, "/postgres"), "bench_source");
      const to = Date.parse("2024-10-20T00:00:00Z");
      const from = to - SPAN_HOURS * HOUR;
      const g0 = performance.now();
      await generateRoomEvents(source.sql, {
        schema: "bench_source",
        rows,
        from: new Date(from),
        to: new Date(to),
        seed: "bench",
        onProgress: (done, total) => {
          if (done === total || done % 250_000 === 0) log(`generated ${done}/${total}`);
        },
      });
      const [sourceTable] = await source.sql<{ n: number; bytes: string }[]>`
        select count(*)::int as n, pg_size_pretty(pg_total_relation_size('bench_source.room_events')) as bytes
          from bench_source.room_events`;
      const total = sourceTable!.n;
      log(
        `source: ${total} rows, ${sourceTable!.bytes}, in ${((performance.now() - g0) / 1000).toFixed(1)} s`,
      );
      await sql`create schema bench_source`;
      await sql.unsafe(`create table bench_source.room_events ${SHAPE}`);
      await sql`create schema bench_copy`;
      await sql`create table bench_copy.naive_events (like app.room_events including all)`;
      await sql`create table bench_copy.ceiling_events (like app.room_events including all)`;
      await Promise.all([sql`checkpoint`, source.sql`checkpoint`]);
      await source.sql`select count(*), sum(length(data::text)) from bench_source.room_events`;

      log("the pipe: binary COPY out of the source database into an empty table in the product database");
      const pipe = await copyPipe(source.sql, sql, "bench_source.room_events");
      if (pipe.rows !== total) throw new Error(`the pipe copied ${pipe.rows} of ${total} rows`);
      log(`pipe: ${pipe.seconds.toFixed(1)} s`);
      await sql`analyze bench_source.room_events`;
      await sql`checkpoint`;

      // Drover twice on the same cluster: rows streamed from the source database, then the copy of
      // the same rows that the run finds in its own database and copies inside it. The destination
      // is emptied in between, and each run's automatic verification is let finish, so neither run
      // shares the machine with the other's work.
      const droverRun = async (
        tenantId: string,
        connection: string,
        expected: number,
        onFinished: () => void = () => {},
      ) => {
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
            },
            source: { name: "pg-table", baseUrl: "", apiToken: connection },
          },
          3_600_000,
        );
        onFinished();
        const seconds = (outcome.finishedAt - outcome.startedAt) / 1000;
        const [landed] = await sql<{ n: number }[]>`
          select count(*)::int as n from app.room_events where tenant_id = ${tenantId}`;
        if (landed!.n !== expected) throw new Error(`Drover landed ${landed!.n} of ${expected} rows`);
        const [path] = await sql<{ value: string }[]>`
          select value #>> '{}' as value from drover.run_facts
           where run_id = ${outcome.run.id}::uuid and key = 'pg-table.copy'`;
        await untilVerified(sql, outcome.run.id);
        return { seconds, path: path?.value };
      };
      log("Drover, streamed from the source database");
      const streamed = await droverRun("bench-streamed", source.url, total);
      if (streamed.path !== "streamed") throw new Error(`the streamed run went ${streamed.path}`);
      log(`Drover streamed: ${streamed.seconds.toFixed(1)} s`);
      log("Drover, in-database copy (the source table in the product database)");
      const inDatabase = await droverRun("bench-drover", bench.testDb.url, total);
      if (inDatabase.path !== "in-database") throw new Error(`the in-database run went ${inDatabase.path}`);
      log(`Drover in-database: ${inDatabase.seconds.toFixed(1)} s`);

      // Memory: a fresh worker alone (its VmHWM is its whole life's peak), the others stopped, the
      // source table grown to rssRows, all of it streamed.
      log(`memory: one worker streams ${rssRows} rows`);
      if (rssRows > total)
        await generateRoomEvents(source.sql, {
          schema: "bench_source",
          rows: rssRows - total,
          from: new Date(from),
          to: new Date(to),
          seed: "bench-memory",
          onProgress: (done, all) => {
            if (done === all || done % 1_000_000 === 0) log(`generated ${done}/${all} more`);
          },
        });
      const [grown] = await source.sql<
        { n: number }[]
      >`select count(*)::int as n from bench_source.room_events`;
      const alone = await bench.cluster.addWorker();
      await Promise.all(bench.cluster.workers.filter((w) => w !== alone).map((w) => w.stop()));
      const idleMb = peakRssMb(alone.pid);
      // The resident set every 2 s through the copy: flat or growing, which the peak alone cannot
      // say. The figure is the peak as the run finishes, before the worker verifies it (the leader
      // asks at once, so a few ms of verification at most are in it); the peak after is kept too.
      const samples: number[] = [];
      const sampler = setInterval(() => {
        try {
          samples.push(Math.round(residentMb(alone.pid)));
        } catch {
          // the worker is gone: the run will fail and say so
        }
      }, 2_000);
      let copyPeakMb = 0;
      const memory = await droverRun("bench-memory", source.url, grown!.n, () => {
        copyPeakMb = peakRssMb(alone.pid);
        clearInterval(sampler);
      }).finally(() => clearInterval(sampler));
      const rssMb = copyPeakMb;
      const verifiedMb = peakRssMb(alone.pid);
      log(
        `memory: ${grown!.n} rows in ${memory.seconds.toFixed(1)} s, peak RSS ${rssMb.toFixed(0)} MB (${idleMb.toFixed(0)} MB once started, ${verifiedMb.toFixed(0)} MB after verifying)`,
      );
      await sql`truncate app.room_events`;
      await bench.stopAll();
      await sql`checkpoint`;

      log("naive: one loop, batches of 25");
      const naive = await naiveLoop(sql, "bench-naive");
      if (naive.rows !== total) throw new Error(`the naive loop copied ${naive.rows} of ${total} rows`);
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

      const drover = total / inDatabase.seconds;
      const streamedRate = total / streamed.seconds;
      const pipeRate = pipe.rows / pipe.seconds;
      const naiveRate = naive.rows / naive.seconds;
      const ceiling = ceilingRows!.n / ceilingSeconds;
      return {
        figures: {
          table_rows_per_s: drover,
          table_vs_naive: drover / naiveRate,
          table_vs_insert_select: drover / ceiling,
          table_streamed_rows_per_s: streamedRate,
          table_streamed_vs_naive: streamedRate / naiveRate,
          copy_pipe_rows_per_s: pipeRate,
          table_streamed_vs_copy_pipe: streamedRate / pipeRate,
          table_worker_rss_mb: rssMb,
        },
        settings: {
          rows,
          quick: ctx.quick,
          memoryRows: grown!.n,
          spanHours: SPAN_HOURS,
          slotWidth: "1h",
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          pgTable: { streamed: { page: 1000, window: 500 }, inDatabase: { page: 4000, window: 2000 } },
          naive: { page: NAIVE_PAGE, batch: NAIVE_BATCH },
          sourceBytes: sourceTable!.bytes,
        },
        details: {
          pipe: { ...pipe, rowsPerSecond: pipeRate },
          drover: {
            rows: total,
            seconds: inDatabase.seconds,
            rowsPerSecond: drover,
            logs: bench.cluster.logDir,
          },
          droverStreamed: { rows: total, seconds: streamed.seconds, rowsPerSecond: streamedRate },
          memory: {
            rows: grown!.n,
            seconds: memory.seconds,
            workerPeakRssMb: rssMb,
            startedPeakRssMb: idleMb,
            residentMbEvery2s: samples,
            peakAfterVerificationMb: verifiedMb,
          },
          naive: { ...naive, rowsPerSecond: naiveRate },
          insertSelect: { rows: ceilingRows!.n, seconds: ceilingSeconds, rowsPerSecond: ceiling },
        },
      };
    } finally {
      await bench.close();
      await source?.drop();
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
