import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { openDatabase } from "@drover/db";
import { createSourceDatabase, EMPTY_CRM_SANDBOX, generateRoomEvents } from "@drover/local-cluster";
import { openBenchCluster, untilVerified } from "./harness.js";
import { backendMeter, TICK, ticks } from "./process-cpu.js";
import { walkWindows } from "./window-walk.js";

/**
 * Where the streamed table copy's time goes, measured so that a loaded machine does not skew it:
 * CPU seconds (utime + stime from /proc) per 1,000 rows of the workers, the coordinator, this
 * process and the Postgres backends of the source and product databases (per application_name),
 * and, given the server's log file (PROFILE_SERVER_LOG; the databases are set to
 * log_min_duration_statement = 0, the workers restarted to pick it up), statements per 1,000 rows and their time by their first words, for the
 * binary COPY pipe (into a table shaped as the run's destination) and for Drover's streamed run
 * (by default 2 workers x lane 4) over the same rows. PROFILE_PAGE / PROFILE_WINDOW override the run's page and window sizes
 * (and the hand walk's, unless PROFILE_WALK_PAGE / PROFILE_WALK_WINDOW say otherwise: the bench walks 2,976-row pages), PROFILE_WORKERS /
 * PROFILE_LANE the cluster's workers and lane width; PROFILE_KEY_ORDER=1 stores the source in key order.
 * Between the two, "windows": the same windows walked by hand with no engine (window-walk.ts), on
 * as many lanes as the cluster has.
 * PROFILE_PERF=<file> also records the whole machine with `perf record -a -g` during the pipe
 * (<file>.pipe) and during the run (<file>), for `perf report --sort comm,pid,sym`: which process,
 * and where in it, a row's time goes (perf's own sampling costs a little of what it measures).
 *
 *   cd test && PROFILE_ROWS=100000 node --import tsx --conditions=@drover/source bench/table-profile.ts
 */

const ROWS = Number(process.env.PROFILE_ROWS ?? 100_000);
/** The server's log file (e.g. /var/log/postgresql/postgresql-15-main.log): statements are counted from it. */
const LOG = process.env.PROFILE_SERVER_LOG || undefined;
const HOUR = 3_600_000;
/** The streamed path's most rows (pg-table copy-sizes.ts), unless PROFILE_PAGE / PROFILE_WINDOW say otherwise. */
const PAGE = Number(process.env.PROFILE_WALK_PAGE ?? process.env.PROFILE_PAGE ?? 5_000);
const WINDOW = Number(process.env.PROFILE_WALK_WINDOW ?? process.env.PROFILE_WINDOW ?? 5_000);
/** `perf record` of the whole machine into `file` until the returned stop is called; nothing without PROFILE_PERF. */
function recordPerf(file: string | undefined): () => Promise<void> {
  if (!file) return async () => {};
  const perf = spawn("perf", ["record", "-a", "-g", "-F", "499", "-o", file], { stdio: "ignore" });
  const exited = new Promise((resolve) => perf.once("exit", resolve));
  return async () => {
    perf.kill("SIGINT");
    await exited;
  };
}
function logOffset(): number {
  return LOG ? statSync(LOG).size : 0;
}

/**
 * Statements the server logged for `db` since `from` (log_min_duration_statement = 0: one line per
 * statement with its duration, parse and bind steps included), counted and timed by their first words.
 */
function statements(
  from: number,
  db: string,
): { total: number; kinds: Record<string, { n: number; ms: number }> } {
  if (!LOG) return { total: 0, kinds: {} };
  const text = readFileSync(LOG, "utf8").slice(from);
  const kinds: Record<string, { n: number; ms: number }> = {};
  let total = 0;
  // A statement of several lines continues on lines without the log's prefix.
  const entries = text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:)/);
  for (const entry of entries) {
    if (!entry.includes(`@${db} `)) continue;
    const m = /LOG: {2}duration: ([\d.]+) ms {2}(statement|execute|parse|bind)[^:]*: ([\s\S]*)$/.exec(entry);
    if (!m) continue;
    const words = m[3]!.trim().replace(/\s+/g, " ").split(" ").slice(0, 4).join(" ").slice(0, 50);
    const kind = kinds[words] ?? { n: 0, ms: 0 };
    kinds[words] = kind;
    kind.ms += Number(m[1]);
    if (m[2] === "statement" || m[2] === "execute") {
      total++;
      kind.n++;
    }
  }
  for (const k of Object.values(kinds)) k.ms = Math.round(k.ms);
  return { total, kinds };
}

const per1k = (x: number, rows: number) => Number(((x * 1000) / rows).toFixed(4));

async function main() {
  const bench = await openBenchCluster({
    name: "table-profile",
    workers: Number(process.env.PROFILE_WORKERS ?? 2),
    laneWidth: Number(process.env.PROFILE_LANE ?? 4),
    sandbox: { ...EMPTY_CRM_SANDBOX },
    env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
  });
  const adminDb = openDatabase(bench.testDb.url, { max: 1 });
  const admin = adminDb.sql;
  const source = await createSourceDatabase(
    bench.testDb.url.replace(/\/[^/]*$/, "/postgres"),
    "bench_source",
  );
  try {
    const sql = bench.database.sql;
    const to = Date.parse("2024-10-20T00:00:00Z");
    const from = to - 48 * HOUR;
    await generateRoomEvents(source.sql, {
      schema: "bench_source",
      rows: ROWS,
      from: new Date(from),
      to: new Date(to),
      seed: "bench",
    });
    // An event log appended as events happen is stored in its keys' order, as the generator stores
    // it; PROFILE_KEY_ORDER=1 rewrites it in exact key order (cluster).
    if (process.env.PROFILE_KEY_ORDER === "1") {
      await source.sql`cluster bench_source.room_events using room_events_pkey`;
      await source.sql`analyze bench_source.room_events`;
    }
    // The pipe's and the hand walk's tables, shaped as the run's destination (its tenant column and both
    // its indexes), as in the bench: the same work at the end of every contender.
    await sql`create schema bench_copy`;
    for (const [table, tenant] of [
      ["pipe_events", "pipe"],
      ["bare_events", "bare"],
    ]) {
      await sql.unsafe(`create table bench_copy.${table} (like app.room_events including all)`);
      await sql.unsafe(`alter table bench_copy.${table} alter column tenant_id set default '${tenant}'`);
    }
    await Promise.all([sql`checkpoint`, source.sql`checkpoint`]);
    await source.sql`select count(*), sum(length(data::text)) from bench_source.room_events`;
    const dbs = [bench.testDb.name, source.name];
    if (LOG) {
      for (const db of dbs) await admin.unsafe(`alter database "${db}" set log_min_duration_statement = 0`);
      // Workers connected before the setting: start as many fresh ones.
      const before = [...bench.cluster.workers];
      for (const w of before) await w.stop();
      for (const _ of before) await bench.cluster.addWorker();
    }
    const workers = bench.cluster.workers.filter((w) => ticks(w.pid) !== undefined);

    // The pipe, on fresh connections so that the log holds its statements.
    const srcDb = openDatabase(source.url, { max: 1 });
    const dstDb = openDatabase(bench.testDb.url, { max: 1 });
    const src = srcDb.sql;
    const dst = dstDb.sql;
    await Promise.all([src`select 1`, dst`select 1`]);
    let meter = backendMeter(admin, dbs);
    await meter.started;
    let offset = logOffset();
    let cpu0 = process.cpuUsage();
    let t0 = performance.now();
    const stopPipePerf = recordPerf(process.env.PROFILE_PERF && `${process.env.PROFILE_PERF}.pipe`);
    const out = await src
      .unsafe("copy (select id, room_id, data from bench_source.room_events) to stdout (format binary)")
      .readable();
    await pipeline(
      out,
      await dst
        .unsafe("copy bench_copy.pipe_events (id, room_id, data) from stdin (format binary)")
        .writable(),
    );
    const pipeSeconds = (performance.now() - t0) / 1000;
    await stopPipePerf();
    const pipeCpu = process.cpuUsage(cpu0);
    const pipeBackends = await meter.stop();
    const pipeStatements = [statements(offset, source.name), statements(offset, bench.testDb.name)];
    await Promise.all([srcDb.close(), dstDb.close()]);

    // The windows, by hand (see the top of this file).
    await sql`create table bench_copy.checkpoint (n bigint not null, at timestamptz)`;
    await sql`insert into bench_copy.checkpoint values (0, now())`;
    const laneCount = workers.length * Number(process.env.PROFILE_LANE ?? 4);
    const windowsDb = openDatabase(bench.testDb.url, { max: laneCount, applicationName: "windows" });
    await sql`checkpoint`;
    meter = backendMeter(admin, dbs);
    await meter.started;
    offset = logOffset();
    cpu0 = process.cpuUsage();
    const windowsSeconds = await walkWindows(source.sql, windowsDb.sql, {
      table: "bench_source.room_events",
      target: "bench_copy.bare_events",
      checkpoint: "bench_copy.checkpoint",
      from,
      to,
      slotMs: HOUR,
      lanes: laneCount,
      page: PAGE,
      window: WINDOW,
    });
    const windowsCpu = process.cpuUsage(cpu0);
    const windowsBackends = await meter.stop();
    const windowsStatements = [statements(offset, source.name), statements(offset, bench.testDb.name)];
    await windowsDb.close();
    const [bare] = await sql<{ n: number }[]>`select count(*)::int as n from bench_copy.bare_events`;
    if (bare!.n !== ROWS) throw new Error(`the windows by hand copied ${bare!.n} of ${ROWS} rows`);

    await sql`checkpoint`;
    meter = backendMeter(admin, dbs);
    await meter.started;
    offset = logOffset();
    const w0 = workers.map((w) => ticks(w.pid) ?? 0);
    const c0 = bench.cluster.coordinators.map((c) => ticks(c.pid) ?? 0);
    cpu0 = process.cpuUsage();
    t0 = performance.now();
    const stopRunPerf = recordPerf(process.env.PROFILE_PERF);
    const outcome = await bench.runToEnd(
      {
        tenantId: "prof",
        sourceAccount: "prof",
        kinds: [],
        settings: {
          table: "bench_source.room_events",
          destination: "app.room_events",
          tenantColumn: "tenant_id",
          mapping: "id=id,room_id=room_id,data=data",
          from: new Date(from).toISOString(),
          to: new Date(to).toISOString(),
          ...(process.env.PROFILE_PAGE ? { pageSize: process.env.PROFILE_PAGE } : {}),
          ...(process.env.PROFILE_WINDOW ? { windowSize: process.env.PROFILE_WINDOW } : {}),
        },
        source: { name: "pg-table", baseUrl: "", apiToken: source.url },
      },
      3_600_000,
    );
    const wall = (performance.now() - t0) / 1000;
    await stopRunPerf();
    const runSeconds = (outcome.finishedAt - outcome.startedAt) / 1000;
    const workerCpu = workers.reduce((s, w, i) => s + ((ticks(w.pid) ?? 0) - w0[i]!) / TICK, 0);
    const coordCpu = bench.cluster.coordinators.reduce(
      (s, c, i) => s + ((ticks(c.pid) ?? 0) - c0[i]!) / TICK,
      0,
    );
    const droverBackends = await meter.stop();
    const droverStatements = [statements(offset, source.name), statements(offset, bench.testDb.name)];
    const [landed] = await sql<{ n: number }[]>`select count(*)::int as n from app.room_events`;
    // How busy the lanes were: the tasks' own time (first start to finish) against the run's time
    // on every lane. What is missing went between tasks: claims, hand-ons, the queue.
    const [lanes] = await sql<
      { tasks: number; taskSeconds: number; firstStart: number; lastFinish: number }[]
    >`
      select count(*)::int as tasks,
             coalesce(sum(extract(epoch from finished_at - started_at)), 0)::float8 as "taskSeconds",
             extract(epoch from min(started_at) - ${new Date(outcome.startedAt).toISOString()}::timestamptz)::float8 as "firstStart",
             extract(epoch from ${new Date(outcome.finishedAt).toISOString()}::timestamptz - max(finished_at))::float8 as "lastFinish"
        from drover.tasks where run_id = ${outcome.run.id}::uuid`;
    await untilVerified(sql, outcome.run.id);

    const report = {
      rows: ROWS,
      pipe: {
        seconds: pipeSeconds,
        rowsPerSecond: Math.round(ROWS / pipeSeconds),
        cpuPer1k: {
          node: per1k((pipeCpu.user + pipeCpu.system) / 1e6, ROWS),
          sourceBackends: per1k(pipeBackends[source.name] ?? 0, ROWS),
          productBackends: per1k(pipeBackends[bench.testDb.name] ?? 0, ROWS),
        },
        statementsPer1k: {
          source: per1k(pipeStatements[0]!.total, ROWS),
          product: per1k(pipeStatements[1]!.total, ROWS),
        },
      },
      windows: {
        seconds: windowsSeconds,
        rowsPerSecond: Math.round(ROWS / windowsSeconds),
        vsPipe: Number((pipeSeconds / windowsSeconds).toFixed(3)),
        cpuPer1k: {
          node: per1k((windowsCpu.user + windowsCpu.system) / 1e6, ROWS),
          sourceBackends: per1k(windowsBackends[source.name] ?? 0, ROWS),
          productBackends: per1k(windowsBackends[bench.testDb.name] ?? 0, ROWS),
        },
        statementsPer1k: {
          source: per1k(windowsStatements[0]!.total, ROWS),
          product: per1k(windowsStatements[1]!.total, ROWS),
        },
        sourceKinds: windowsStatements[0]!.kinds,
        productKinds: windowsStatements[1]!.kinds,
      },
      drover: {
        vsPipe: Number((pipeSeconds / runSeconds).toFixed(3)),
        vsWindows: Number((windowsSeconds / runSeconds).toFixed(3)),
        landed: landed!.n,
        runSeconds,
        wall,
        rowsPerSecond: Math.round(ROWS / runSeconds),
        lanes: {
          ...lanes,
          utilization: Number((lanes!.taskSeconds / (runSeconds * laneCount)).toFixed(3)),
        },
        cpuPer1k: {
          workers: per1k(workerCpu, ROWS),
          coordinator: per1k(coordCpu, ROWS),
          sourceBackends: per1k(droverBackends[source.name] ?? 0, ROWS),
          productBackends: per1k(droverBackends[bench.testDb.name] ?? 0, ROWS),
        },
        backendsByApp: Object.fromEntries(
          Object.entries(droverBackends).map(([k, v]) => [k, per1k(v, ROWS)]),
        ),
        statementsPer1k: {
          source: per1k(droverStatements[0]!.total, ROWS),
          product: per1k(droverStatements[1]!.total, ROWS),
        },
        sourceKinds: droverStatements[0]!.kinds,
        productKinds: droverStatements[1]!.kinds,
      },
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await adminDb.close();
    await bench.close();
    await source.drop();
  }
}

await main();
