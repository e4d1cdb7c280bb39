import { createSourceDatabase, generateRoomEvents, type SourceDatabase } from "@drover/local-cluster";
import { Code, type Run, RunStatus, timestampDate } from "@drover/proto";
import { encodeUlidTime } from "@drover/source-pg-table";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Cluster,
  rejection,
  startCluster,
  untilFinished,
  untilVerifiedAfter,
} from "../support/in-process.js";

/**
 * Re-drive of a source without a GET by id and without a ledger: pg-table. A first copy loses the
 * rows the destination refuses (a null its NOT NULL columns reject), the source is fixed, and
 * RetryRun with a filter walks again, in keyset pages, the slots whose tasks noted those rows and
 * writes only the rows asked for. Every other destination row keeps its xmin (not written again),
 * and the run's counts move each re-driven row from failed to imported.
 */

const HOUR = 3_600_000;
const FROM = Date.parse("2024-10-01T00:00:00Z");

let c: Cluster;
let src: SourceDatabase;

beforeAll(async () => {
  // The cluster's crm sandbox holds nothing: this file copies a table.
  const empty = {
    organizations: 0,
    persons: 0,
    deals: 0,
    leads: 0,
    activities: 0,
    notes: 0,
    mailPerDealMax: 0,
  };
  c = await startCluster({ sandbox: empty, workers: 1 });
  src = await createSourceDatabase(c.testDb.url.replace(/\/[^/]*$/, "/postgres"));
});
afterAll(async () => {
  await c?.close();
  await src?.drop();
});

async function startCopy(schema: string, table: string, hours: number, extra: Record<string, string>) {
  const { run } = await c.client.startRun({
    tenantId: `redrive-${schema}`,
    source: "pg-table",
    sourceAccount: `source-${schema}`,
    sourceConfig: {
      baseUrl: "",
      apiToken: src.url,
      settings: {
        table: `${schema}.${table}`,
        destination: "app.room_events",
        tenantColumn: "tenant_id",
        mapping: "id=id,room_id=room_id,data=data",
        from: new Date(FROM).toISOString(),
        to: new Date(FROM + hours * HOUR).toISOString(),
        pageSize: "100",
        windowSize: "40",
        ...extra,
      },
    },
  });
  return run!.id;
}

/** Every destination row of the tenant with the transaction that last wrote it. */
async function destination(tenantId: string): Promise<Map<string, string>> {
  const rows = await c.database.sql<{ id: string; xmin: string }[]>`
    select id, xmin::text as xmin from app.room_events where tenant_id = ${tenantId}`;
  return new Map(rows.map((r) => [r.id, r.xmin]));
}

const rowsProgress = (run: Run) => run.progress.find((p) => p.kind === "rows")!;

const untilVerified = (runId: string, after: Date) => untilVerifiedAfter(c, runId, after);

/**
 * Re-drives `filter` and checks that exactly `ids` were written: each is in the destination now,
 * no other row was written again (same xmin) nor added, the re-drive's tasks attempted those rows
 * only, and the counts moved each from failed to imported.
 */
async function redriveAndCheck(
  runId: string,
  tenantId: string,
  filter: { kind?: string; reason?: string; sourceIds?: string[] },
  ids: readonly string[],
): Promise<Run> {
  const before = (await c.client.getRun({ runId })).run!;
  const rowsBefore = await destination(tenantId);
  for (const id of ids) expect(rowsBefore.has(id), `${id} failed in the first copy`).toBe(false);
  const [latest] = await c.database.sql<{ max: string | null }[]>`
    select max(id)::text as max from drover.tasks where run_id = ${runId}::uuid`;
  const max = latest?.max ?? null;

  await c.client.retryRun({ runId, ...filter });
  const after = await untilFinished(c, runId, 60_000);
  expect(after.status).toBe(RunStatus.SUCCEEDED);
  await untilVerified(runId, timestampDate(after.finishedAt!));

  const rowsAfter = await destination(tenantId);
  expect(rowsAfter.size).toBe(rowsBefore.size + ids.length);
  for (const id of ids) expect(rowsAfter.has(id), `${id} is imported`).toBe(true);
  for (const [id, xmin] of rowsBefore) expect(rowsAfter.get(id), `${id} is not written again`).toBe(xmin);

  const tasks = await c.database.sql<
    { rows_read: string; created: number; cursor: { redrive?: string[] } }[]
  >`
    select rows_read::text, coalesce((stats ->> 'created')::int, 0) as created, cursor from drover.tasks
     where run_id = ${runId}::uuid and id > ${max ?? 0}::bigint`;
  expect(tasks.length).toBeGreaterThan(0);
  expect(tasks.flatMap((t) => t.cursor.redrive ?? []).sort()).toEqual([...ids].sort());
  expect(tasks.reduce((n, t) => n + Number(t.rows_read), 0)).toBe(ids.length);
  expect(tasks.reduce((n, t) => n + t.created, 0)).toBe(ids.length);

  const was = rowsProgress(before);
  const now = rowsProgress(after);
  expect(now.failed).toBe(was.failed - BigInt(ids.length));
  expect(now.imported).toBe(was.imported + BigInt(ids.length));
  expect(now.alreadyHere).toBe(was.alreadyHere);
  return after;
}

async function errorNotes(runId: string): Promise<Map<string, string>> {
  const rows = await c.database.sql<{ subject_id: string; reason: string }[]>`
    select subject_id, reason from drover.notes where run_id = ${runId}::uuid and level = 'error'`;
  return new Map(rows.map((r) => [r.subject_id, r.reason]));
}

describe("RetryRun with a filter on a source without a GET by id (pg-table)", { timeout: 240_000 }, () => {
  it("keyed by ULID: each filter re-reads the pages that held its rows and writes exactly them", async () => {
    const schema = "by_key";
    const tenantId = `redrive-${schema}`;
    await generateRoomEvents(src.sql, {
      schema,
      rows: 1_500,
      from: new Date(FROM),
      to: new Date(FROM + 4 * HOUR),
    });
    await src.sql.unsafe(`alter table ${schema}.room_events alter column room_id drop not null`);
    await src.sql.unsafe(`alter table ${schema}.room_events alter column data drop not null`);
    // Two reasons the destination refuses a row, in three of the four slots.
    const key = (minute: number, tag: string) =>
      `${encodeUlidTime(FROM + minute * 60_000)}${tag.padEnd(16, "0")}`;
    const noRoom = [key(10, "NR1"), key(11, "NR2"), key(150, "NR3")];
    const noData = [key(70, "ND1"), key(200, "ND2")];
    for (const id of noRoom)
      await src.sql.unsafe(`insert into ${schema}.room_events values ($1, null, '{"type":"bad"}')`, [id]);
    for (const id of noData)
      await src.sql.unsafe(`insert into ${schema}.room_events values ($1, gen_random_uuid(), null)`, [id]);

    const runId = await startCopy(schema, "room_events", 4, {});
    const first = await untilFinished(c, runId, 90_000);
    expect(first.status).toBe(RunStatus.SUCCEEDED);
    await untilVerified(runId, timestampDate(first.finishedAt!));
    expect(rowsProgress(first).failed).toBe(5n);
    const noted = await errorNotes(runId);
    expect([...noted.keys()].sort()).toEqual([...noRoom, ...noData].sort());
    const roomReason = noted.get(noRoom[0]!)!;
    expect(roomReason).toMatch(/room_id|23502/);
    expect(noRoom.every((id) => noted.get(id) === roomReason)).toBe(true);
    expect(noData.every((id) => noted.get(id) !== roomReason)).toBe(true);

    // The customer fixes every bad row; each re-drive must still take only the rows it names.
    await src.sql.unsafe(
      `update ${schema}.room_events set room_id = coalesce(room_id, gen_random_uuid()), data = coalesce(data, '{"type":"fixed"}')
        where id = any($1::text[])`,
      [[...noRoom, ...noData]],
    );

    // By reason: the three rows the room_id group counts, in two slots.
    const { groups } = await c.client.listNotes({ runId, level: "error" });
    expect(groups.find((g) => g.reason === roomReason)?.count).toBe(3n);
    await redriveAndCheck(runId, tenantId, { reason: roomReason }, noRoom);
    const explained = await c.client.explainRecord({
      tenantId,
      source: "pg-table",
      sourceAccount: `source-${schema}`,
      kind: "rows",
      sourceId: noRoom[0]!,
    });
    expect(explained.explanation).toContain(`then a re-drive of run ${runId} wrote it`);
    const { groups: left } = await c.client.listNotes({ runId, level: "error" });
    expect(left.map((g) => g.count)).toEqual([2n]);
    const again = await rejection(c.client.retryRun({ runId, reason: roomReason }));
    expect(again.code).toBe(Code.FAILED_PRECONDITION);

    // By ids, then by kind: the data group one row at a time.
    await redriveAndCheck(runId, tenantId, { sourceIds: [noData[1]!] }, [noData[1]!]);
    const done = await redriveAndCheck(runId, tenantId, { kind: "rows" }, [noData[0]!]);
    expect(rowsProgress(done).failed).toBe(0n);

    // Verification counts the source against the destination alone now: nothing failed, nothing lost.
    const { verification } = await c.client.verifyRun({ runId });
    expect(verification!.kinds[0]!.mismatches).toEqual([]);
    expect(Number(verification!.kinds[0]!.failedCount)).toBe(0);
    expect(verification!.ok).toBe(true);
  });

  it("ordered by a time column: the slots holding the rows are walked again, only those rows written", async () => {
    const schema = "by_time";
    const tenantId = `redrive-${schema}`;
    await src.sql.unsafe(`create schema ${schema}`);
    await src.sql.unsafe(
      `create table ${schema}.events (id text primary key, room_id uuid, data jsonb not null, created_at timestamptz not null)`,
    );
    // 600 rows on 60 instants over 2 hours, so pages end inside ties; four have no room.
    await src.sql.unsafe(
      `insert into ${schema}.events
       select md5(i::text), case when i % 150 = 7 then null else md5('r' || (i % 7)::text)::uuid end,
              jsonb_build_object('i', i), $1::timestamptz + make_interval(secs => (i % 60) * 120)
         from generate_series(1, 600) i`,
      [new Date(FROM).toISOString()],
    );
    const bad = (
      await src.sql.unsafe<{ id: string }[]>(
        `select id from ${schema}.events where room_id is null order by id`,
      )
    ).map((r) => r.id);
    expect(bad).toHaveLength(4);

    const runId = await startCopy(schema, "events", 2, {
      timeColumn: "created_at",
      mapping: "id=id,room_id=room_id,data=data,copied_at=created_at",
      pageSize: "70",
      windowSize: "30",
    });
    const first = await untilFinished(c, runId, 90_000);
    expect(first.status).toBe(RunStatus.SUCCEEDED);
    await untilVerified(runId, timestampDate(first.finishedAt!));
    expect([...(await errorNotes(runId)).keys()].sort()).toEqual(bad);

    await src.sql.unsafe(`update ${schema}.events set room_id = gen_random_uuid() where room_id is null`);
    await redriveAndCheck(runId, tenantId, { kind: "rows" }, bad);
    const { verification } = await c.client.verifyRun({ runId });
    expect(verification!.kinds[0]!.mismatches).toEqual([]);
    expect(verification!.ok).toBe(true);
  });
});
