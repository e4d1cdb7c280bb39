import {
  createSourceDatabase,
  EMPTY_CRM_SANDBOX,
  generateRoomEvents,
  type SourceDatabase,
} from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import { encodeUlidTime, ulidFloor } from "@drover/source-pg-table";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";

/**
 * The pg-table source end to end, with real processes: a source table in a second database, a
 * coordinator and workers, the copy into app.room_events without a ledger, and verification.
 */
let h: Harness;
let src: SourceDatabase;

const HOUR = 3_600_000;
const FROM = Date.parse("2024-10-01T00:00:00Z");
const MAPPING = "id=id,room_id=room_id,data=data";

beforeAll(async () => {
  h = await openClusterHarness({
    workers: 2,
    laneWidth: 2,
    sandbox: { ...EMPTY_CRM_SANDBOX },
    env: {
      DROVER_SWEEP_INTERVAL_MS: "500",
      DROVER_STALE_TASK_MS: "5000",
      DROVER_REDISPATCH_AFTER_MS: "5000",
    },
  });
  src = await createSourceDatabase(h.testDb.url.replace(/\/[^/]*$/, "/postgres"));
});

afterAll(async () => {
  await h?.close();
  await src?.drop();
});

async function startCopy(
  schema: string,
  hours: number,
  extra: Record<string, string> = {},
  connection = src.url,
) {
  const { run } = await h.client.startRun({
    tenantId: `tenant-${schema}`,
    source: "pg-table",
    sourceAccount: `source-${schema}`,
    sourceConfig: {
      baseUrl: "",
      apiToken: connection,
      settings: {
        table: `${schema}.room_events`,
        destination: "app.room_events",
        tenantColumn: "tenant_id",
        mapping: MAPPING,
        from: new Date(FROM).toISOString(),
        to: new Date(FROM + hours * HOUR).toISOString(),
        ...extra,
      },
    },
  });
  return run!.id;
}

async function tasksOf(runId: string) {
  return h.database.db.execute<{
    id: string;
    cursor: { from: number; to: number; lastId?: string };
    rows_read: string;
    rows_written: string;
    attempts: number;
    status: string;
    stats: Record<string, number>;
  }>(sql`select id, cursor, rows_read, rows_written, attempts, status, stats from drover.tasks
          where run_id = ${runId}::uuid order by id`);
}

async function destinationCount(tenantId: string, id?: string): Promise<number> {
  const [r] = await h.database.db.execute<{ n: number }>(sql`
    select count(*)::int as n from app.room_events where tenant_id = ${tenantId} and (${id ?? null}::text is null or id = ${id ?? null})`);
  return r!.n;
}

describe("pg-table", () => {
  const schema = "bounds";
  const tenantId = `tenant-${schema}`;
  let runId: string;
  const boundaries: string[] = [];
  const outside: string[] = [];
  let bad: string;
  let inRange = 0;

  it("copies rows exactly at slot boundaries once, loses only a bad row, and verifies clean", async () => {
    await generateRoomEvents(src.sql, {
      schema,
      rows: 3_000,
      from: new Date(FROM),
      to: new Date(FROM + 6 * HOUR),
    });
    // The first ULID of each slot's first millisecond and the last ULID of the millisecond before it.
    for (let s = 0; s <= 6; s++) {
      const edge = FROM + s * HOUR;
      if (s < 6) boundaries.push(ulidFloor(edge));
      if (s > 0) boundaries.push(`${encodeUlidTime(edge - 1)}ZZZZZZZZZZZZZZZZ`);
    }
    outside.push(ulidFloor(FROM + 6 * HOUR), `${encodeUlidTime(FROM - 1)}ZZZZZZZZZZZZZZZZ`);
    bad = `${encodeUlidTime(FROM + 90 * 60_000)}BADR0WBADR0WBADR`;
    await src.sql.unsafe(`alter table ${schema}.room_events alter column room_id drop not null`);
    for (const id of [...boundaries, ...outside])
      await src.sql.unsafe(
        `insert into ${schema}.room_events values ($1, gen_random_uuid(), '{"type":"edge"}') on conflict do nothing`,
        [id],
      );
    // The destination's room_id is NOT NULL: this row fails its window's batch, and only itself.
    await src.sql.unsafe(`insert into ${schema}.room_events values ($1, null, '{"type":"bad"}')`, [bad]);
    const [c] = await src.sql.unsafe<{ n: string }[]>(
      `select count(*)::text as n from ${schema}.room_events where id >= $1 and id < $2`,
      [ulidFloor(FROM), ulidFloor(FROM + 6 * HOUR)],
    );
    inRange = Number(c!.n);

    runId = await startCopy(schema, 6, { windowSize: "200", pageSize: "500", sampleSize: "100000" });
    const last = await watchToEnd(h.client, runId);
    expect(last.status).toBe(RunStatus.SUCCEEDED);

    // The connection string is the run's sealed secret, never its settings.
    const [stored] = await h.database.db.execute<{ config: string }>(
      sql`select source_config::text as config from drover.runs where id = ${runId}::uuid`,
    );
    expect(stored!.config).not.toContain(src.name);

    for (const id of boundaries) expect(await destinationCount(tenantId, id)).toBe(1);
    for (const id of outside) expect(await destinationCount(tenantId, id)).toBe(0);
    expect(await destinationCount(tenantId, bad)).toBe(0);
    expect(await destinationCount(tenantId)).toBe(inRange - 1);

    // One task per slot, newest first; each read exactly the rows of its own bounds.
    const tasks = await tasksOf(runId);
    expect(tasks.map((t) => t.cursor.from)).toEqual([5, 4, 3, 2, 1, 0].map((s) => FROM + s * HOUR));
    for (const t of tasks) {
      const [n] = await src.sql.unsafe<{ n: string }[]>(
        `select count(*)::text as n from ${schema}.room_events where id >= $1 and id < $2`,
        [ulidFloor(t.cursor.from), ulidFloor(t.cursor.to)],
      );
      expect(Number(t.rows_read)).toBe(Number(n!.n));
      expect(t.stats.already_here ?? 0).toBe(0);
    }
    expect(tasks.reduce((a, t) => a + Number(t.rows_read), 0)).toBe(inRange);
    expect(tasks.reduce((a, t) => a + Number(t.rows_written), 0)).toBe(inRange - 1);

    const notes = await h.database.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${runId}::uuid and level = 'error'`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual([bad]);
    expect(notes[0]!.reason).toMatch(/room_id|23502/);
    const { run: streamed } = await h.client.getRun({ runId });
    expect(streamed!.facts["pg-table.copy"]).toBe('"streamed"');

    // Without a ledger the run still has a throughput: its windows add up to every row it read.
    const { points } = await h.client.getThroughput({ runId, buckets: 30 });
    expect(points.reduce((n, p) => n + Number(p.rows), 0)).toBe(inRange);

    const { verification } = await h.client.verifyRun({ runId });
    expect(verification!.error).toBe("");
    expect(verification!.kinds[0]!.mismatches).toEqual([]);
    expect(verification!.ok).toBe(true);
    expect(Number(verification!.kinds[0]!.sourceCount)).toBe(inRange);
    expect(Number(verification!.kinds[0]!.failedCount)).toBe(1);
  });

  it("verification lists a destination row deleted and another altered after the copy", async () => {
    const [deleted, altered] = [boundaries[3]!, boundaries[6]!];
    await h.database.db.execute(
      sql`delete from app.room_events where tenant_id = ${tenantId} and id = ${deleted}`,
    );
    await h.database.db.execute(
      sql`update app.room_events set data = '{"type":"tampered"}' where tenant_id = ${tenantId} and id = ${altered}`,
    );
    const { verification } = await h.client.verifyRun({ runId });
    expect(verification!.ok).toBe(false);
    const mismatches = verification!.kinds[0]!.mismatches;
    expect(mismatches.some((m) => m.startsWith(`${deleted}: in the source`) && m.includes("lost"))).toBe(
      true,
    );
    expect(mismatches.some((m) => m.startsWith(`${altered}: data is`) && m.includes("tampered"))).toBe(true);
    expect(mismatches.some((m) => /the source holds \d+ rows; the destination \d+/.test(m))).toBe(true);
  });

  it.each([
    [
      "streamed from another database by binary COPY",
      "killed",
      "streamed",
      () => ({ sql: src.sql, url: src.url }),
    ],
    [
      "copied inside the product database",
      "killed_inside",
      "in-database",
      () => ({ sql: h.database.sql, url: h.testDb.url }),
    ],
  ])(
    "a worker killed mid-slot (%s): another resumes from last_id, with no row written twice and none skipped",
    async (_, big, path, where) => {
      const rows = 40_000;
      const { sql: source, url } = where();
      await generateRoomEvents(source, {
        schema: big,
        rows,
        from: new Date(FROM),
        to: new Date(FROM + HOUR),
      });
      const [c] = await source.unsafe<{ n: string }[]>(`select count(*)::text as n from ${big}.room_events`);
      const total = Number(c!.n);
      const id = await startCopy(big, 1, { windowSize: "100", pageSize: "500" }, url);

      const victim = await until(
        "the slot task past its first windows",
        async () => {
          const [t] = await h.database.db.execute<{
            id: string;
            locked_by: string;
            rows_written: string;
          }>(sql`
          select id, locked_by, rows_written from drover.tasks
           where run_id = ${id}::uuid and status = 'running' and rows_written >= 1000`);
          return t;
        },
        120_000,
      );
      const [fact] = await h.database.db.execute<{ value: string }>(sql`
        select value #>> '{}' as value from drover.run_facts where run_id = ${id}::uuid and key = 'pg-table.copy'`);
      expect(fact?.value).toBe(path);
      const worker = h.cluster.workers.find((w) => w.name === victim.locked_by.split("/")[0])!;
      worker.signal("SIGKILL");
      await worker.exited;
      const [atKill] = await h.database.db.execute<{ rows_written: string; cursor: { lastId?: string } }>(
        sql`select rows_written, cursor from drover.tasks where id = ${victim.id}`,
      );
      expect(Number(atKill!.rows_written)).toBeLessThan(total);
      expect(atKill!.cursor.lastId).toBeDefined();
      await h.cluster.addWorker();

      const last = await watchToEnd(h.client, id);
      expect(last.status).toBe(RunStatus.SUCCEEDED);
      const [task] = await tasksOf(id);
      expect(task!.attempts).toBeGreaterThanOrEqual(2);
      // Counters move only with committed windows: every row read and written once in all, and no
      // committed row was upserted again (already_here), so the resume began right after last_id.
      expect(Number(task!.rows_read)).toBe(total);
      expect(Number(task!.rows_written)).toBe(total);
      expect(task!.stats.already_here ?? 0).toBe(0);
      expect(await destinationCount(`tenant-${big}`)).toBe(total);
      const { verification } = await h.client.verifyRun({ runId: id });
      expect(verification!.kinds[0]!.mismatches).toEqual([]);
    },
  );

  it("slots by a timestamp column: ties on the time are walked by (time, id) and none is lost", async () => {
    const schema = "by_time";
    await src.sql.unsafe(`create schema ${schema}`);
    await src.sql.unsafe(
      `create table ${schema}.events (id text primary key, room_id uuid not null, data jsonb not null, created_at timestamptz not null)`,
    );
    // 2,400 rows on only 120 distinct instants over 3 hours: every page boundary falls inside a tie.
    await src.sql.unsafe(
      `insert into ${schema}.events
       select md5(i::text), md5('r' || (i % 7)::text)::uuid, jsonb_build_object('i', i),
              $1::timestamptz + make_interval(secs => (i % 120) * 90)
         from generate_series(1, 2400) i`,
      [new Date(FROM).toISOString()],
    );
    const id = await startCopy(schema, 3, {
      table: `${schema}.events`,
      timeColumn: "created_at",
      mapping: "id=id,room_id=room_id,data=data,copied_at=created_at",
      pageSize: "70",
      windowSize: "30",
      sampleSize: "50",
    });
    const last = await watchToEnd(h.client, id);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    const tasks = await tasksOf(id);
    expect(tasks).toHaveLength(3);
    expect(tasks.map((t) => Number(t.rows_read))).toEqual([800, 800, 800]);
    expect(tasks.every((t) => (t.stats.already_here ?? 0) === 0)).toBe(true);
    expect(await destinationCount(`tenant-${schema}`)).toBe(2400);
    const { verification } = await h.client.verifyRun({ runId: id });
    expect(verification!.error).toBe("");
    expect(verification!.kinds[0]!.mismatches).toEqual([]);
    expect(verification!.ok).toBe(true);
  });

  it("a source table in the product database is copied inside it, slot by slot, and verifies clean", async () => {
    const schema = "in_product";
    await generateRoomEvents(h.database.sql, {
      schema,
      rows: 3_000,
      from: new Date(FROM),
      to: new Date(FROM + 4 * HOUR),
    });
    const runId = await startCopy(schema, 4, { windowSize: "200", pageSize: "500" }, h.testDb.url);
    const last = await watchToEnd(h.client, runId);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    const tasks = await tasksOf(runId);
    expect(tasks).toHaveLength(4);
    expect(tasks.reduce((a, t) => a + Number(t.rows_read), 0)).toBe(3_000);
    expect(tasks.reduce((a, t) => a + Number(t.rows_written), 0)).toBe(3_000);
    const [diff] = await h.database.db.execute<{ n: number }>(sql`
      select count(*)::int as n from (
        select id, room_id, data from in_product.room_events
        except select id, room_id, data from app.room_events where tenant_id = ${`tenant-${schema}`}) d`);
    expect(diff!.n).toBe(0);
    // Operators see which way the rows went.
    const { run } = await h.client.getRun({ runId });
    expect(run!.facts["pg-table.copy"]).toBe('"in-database"');
    const { verification } = await h.client.verifyRun({ runId });
    expect(verification!.kinds[0]!.mismatches).toEqual([]);
    expect(verification!.ok).toBe(true);
  });
});
