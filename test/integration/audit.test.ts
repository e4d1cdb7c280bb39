import { randomUUID } from "node:crypto";
import { describeFailure, type Io, runCommand } from "@drover/cli";
import { keysCommand } from "@drover/coordinator";
import { Code, RunStatus, timestampFromDate } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN,
  type Cluster,
  rejection,
  SETTINGS,
  startCluster,
  until,
  untilFinished,
} from "../support/in-process.js";

/**
 * Who did what, against a real coordinator: least-privilege scopes (read, tenant, revert), checked
 * per method; every run-changing call recorded once in drover.audit_events, refused or not;
 * ListAuditEvents scoped to the caller's tenants; the table append-only and pruned by retention.
 */

let c: Cluster;
const T = `audit-t-${randomUUID().slice(0, 6)}`;
const T2 = `audit-u-${randomUUID().slice(0, 6)}`;
const O = `audit-o-${randomUUID().slice(0, 6)}`;
/** A finished run of tenant T. */
let finished = "";

beforeAll(async () => {
  c = await startCluster({
    workers: 1,
    apiKeys: {
      reader: `read:${T}`,
      steerer: `tenant:${T}`,
      reverter: `revert:${T}`,
      operator: `tenant:${T2}`,
      other: `tenant:${O}`,
      mixed: `tenant:${T}+revert:${O}`,
    },
  });
  finished = (await c.start(T, ["organizations"])).id;
  expect((await untilFinished(c, finished)).status).toBe(RunStatus.SUCCEEDED);
});
afterAll(async () => {
  await c?.close();
});

type AuditRow = {
  id: string;
  /** Raw SQL gives timestamps as text. */
  at: string;
  key_id: string | null;
  actor: string;
  scopes: string;
  action: string;
  tenant_id: string | null;
  run_id: string | null;
  peer: string;
  outcome: string;
  message: string | null;
  details: Record<string, string>;
};

/** The key's audit rows after `afterId` (a test's own, should vitest run it a second time). */
async function auditRowsOf(keyId: string, afterId: number): Promise<AuditRow[]> {
  return [
    ...(await c.database.db.execute<AuditRow>(
      sql`select * from drover.audit_events where key_id = ${keyId} and id > ${afterId} order by id`,
    )),
  ];
}

async function lastAuditId(): Promise<number> {
  const [row] = await c.database.db.execute<{ id: number }>(
    sql`select coalesce(max(id), 0)::int as id from drover.audit_events`,
  );
  return row!.id;
}

/** Everything a mutation could have changed: every run and every task, one digest each. */
async function runsAndTasks(): Promise<string> {
  const [row] = await c.database.db.execute<{ runs: string; tasks: string }>(sql`
    select (select md5(coalesce(string_agg(concat_ws(',', id, status, current_phase, reverts_run_id,
                                                      finished_at), '|' order by id), ''))
              from drover.runs) as runs,
           (select md5(coalesce(string_agg(concat_ws(',', id, status, attempts), '|' order by id), ''))
              from drover.tasks) as tasks`);
  return `${row!.runs}/${row!.tasks}`;
}

const startRequest = (tenantId: string, account: string) => ({
  tenantId,
  source: "crm",
  sourceAccount: account,
  kinds: ["organizations"],
  sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
});

describe("least privilege", { timeout: 120_000 }, () => {
  it("a read-only key is refused every mutation with PERMISSION_DENIED and leaves nothing but its audit lines", async () => {
    const reader = c.clientWith(c.tokens.reader);
    const mark = await lastAuditId();
    const before = await runsAndTasks();
    const mutations: [string, () => Promise<unknown>][] = [
      ["StartRun", () => reader.startRun(startRequest(T, "reader"))],
      ["StopRun", () => reader.stopRun({ runId: finished })],
      ["ResumeRun", () => reader.resumeRun({ runId: finished })],
      ["RetryRun", () => reader.retryRun({ runId: finished })],
      ["RetryRun", () => reader.retryRun({ runId: finished, kind: "organizations", sourceIds: ["1"] })],
      ["CompleteRun", () => reader.completeRun({ runId: finished })],
      ["RevertRun", () => reader.revertRun({ runId: finished })],
      ["RevertRun", () => reader.revertRun({ runId: finished, force: true })],
      ["VerifyRun", () => reader.verifyRun({ runId: finished })],
      [
        "CloseMigration",
        () => reader.closeMigration({ tenantId: T, source: "crm", sourceAccount: "reader" }),
      ],
    ];
    for (const [name, call] of mutations) {
      const err = await rejection(call());
      expect(err.code, name).toBe(Code.PERMISSION_DENIED);
      expect(err.message, name).toMatch(new RegExp(`key "reader-key" \\(read:${T}\\) may not call ${name}`));
    }
    expect(await runsAndTasks()).toBe(before);

    // Its audit lines: one per audited call (VerifyRun changes no run and is not audited), each refused.
    const rows = await auditRowsOf("reader-key", mark);
    expect(rows.map((r) => r.action)).toEqual(
      mutations.map(([name]) => name).filter((name) => name !== "VerifyRun"),
    );
    for (const row of rows) {
      expect(row).toMatchObject({ outcome: "PERMISSION_DENIED", tenant_id: T, scopes: `read:${T}` });
      expect(row.run_id).toBe(row.action === "StartRun" || row.action === "CloseMigration" ? null : finished);
    }

    // And it reads everything a tenant key reads.
    expect((await reader.getRun({ runId: finished })).run!.id).toBe(finished);
    expect((await reader.listRuns({})).runs.map((r) => r.id)).toContain(finished);
    await reader.listNotes({ runId: finished });
    await reader.getThroughput({ runId: finished });
    for await (const update of reader.watchRun({ runId: finished })) expect(update.run!.id).toBe(finished);
    await reader.explainRecord({
      tenantId: T,
      source: "crm",
      sourceAccount: "acct",
      kind: "organizations",
      sourceId: "1",
    });
    expect((await reader.listAuditEvents({ runId: finished })).events.length).toBeGreaterThan(0);
  });

  it("a tenant key may not revert, with or without force; a revert-scoped key may, and may not steer", async () => {
    const steerer = c.clientWith(c.tokens.steerer);
    const mark = await lastAuditId();
    for (const force of [false, true]) {
      const err = await rejection(steerer.revertRun({ runId: finished, force }));
      expect(err.code).toBe(Code.PERMISSION_DENIED);
      expect(err.message).toMatch(/may not call RevertRun: it needs the scope revert:<tenant>/);
    }
    // A key that may revert another tenant's runs only: the run's tenant decides, in the handler.
    const mixed = await rejection(c.clientWith(c.tokens.mixed).revertRun({ runId: finished }));
    expect(mixed.code).toBe(Code.PERMISSION_DENIED);
    expect(mixed.message).toBe(
      `key "mixed-key" may not revert runs for tenant "${T}": that needs the scope revert:${T} (or admin)`,
    );

    const reverter = c.clientWith(c.tokens.reverter);
    const { run } = await reverter.revertRun({ runId: finished });
    expect(run!.id).not.toBe(finished);
    expect(run!.tenantId).toBe(T);
    const stop = await rejection(reverter.stopRun({ runId: run!.id }));
    expect(stop.code).toBe(Code.PERMISSION_DENIED);
    expect(stop.message).toMatch(/may not call StopRun: it needs the scope tenant:<tenant>/);

    const [revert, refusedStop] = await auditRowsOf("reverter-key", mark);
    expect(revert).toMatchObject({
      action: "RevertRun",
      outcome: "ok",
      message: null,
      tenant_id: T,
      run_id: finished,
      scopes: `revert:${T}`,
      details: { force: "false", revert_run_id: run!.id },
    });
    expect(refusedStop).toMatchObject({ action: "StopRun", outcome: "PERMISSION_DENIED", run_id: run!.id });
    // The revert run's own history starts with the call that started it.
    const history = (await c.client.listAuditEvents({ runId: run!.id })).events;
    expect(history.map((e) => [e.action, e.outcome, e.runId])).toEqual([
      ["StopRun", "PERMISSION_DENIED", run!.id],
      ["RevertRun", "ok", finished],
    ]);
    expect(
      (await auditRowsOf("steerer-key", mark)).map((r) => [r.action, r.outcome, r.details.force]),
    ).toEqual([
      ["RevertRun", "PERMISSION_DENIED", "false"],
      ["RevertRun", "PERMISSION_DENIED", "true"],
    ]);
    await untilFinished(c, run!.id);
  });
});

describe("the audit trail", { timeout: 120_000 }, () => {
  it("each audited call writes exactly one row: who, when, what, tenant, run, address and outcome", async () => {
    const operator = c.clientWith(c.tokens.operator);
    const mark = await lastAuditId();
    const from = new Date(Date.now() - 1000);
    /** What the caller heard, as the audit row should say it. */
    const heard: { outcome: string; message: string | null }[] = [];
    const call = async <R>(promise: Promise<R>): Promise<R | undefined> => {
      try {
        const response = await promise;
        heard.push({ outcome: "ok", message: null });
        return response;
      } catch (err) {
        const { code, message } = err as { code: number; message: string };
        heard.push({ outcome: Code[code]!, message: message.replace(/^\d+ [A-Z_]+: /, "") });
        return undefined;
      }
    };
    const runId = (await call(operator.startRun(startRequest(T2, "audited"))))!.run!.id;
    await call(operator.stopRun({ runId }));
    await untilFinished(c, runId);
    await call(operator.resumeRun({ runId }));
    // The run may finish first, which would make this stop FAILED_PRECONDITION: either is recorded as heard.
    await call(operator.stopRun({ runId }));
    await untilFinished(c, runId);
    await call(
      operator.retryRun({ runId, kind: "organizations", reason: "no such reason", sourceIds: ["7", "8"] }),
    );
    await call(operator.completeRun({ runId }));
    const missing = randomUUID();
    await call(operator.stopRun({ runId: missing }));
    await call(operator.resumeRun({ runId: "not-a-run" }));
    // Nobody authenticated: nobody to name, nothing recorded.
    const total = async () =>
      (
        await c.database.db.execute<{ n: number }>(sql`select count(*)::int as n from drover.audit_events`)
      )[0]!.n;
    const rowsBefore = await total();
    expect((await rejection(c.clientWith(undefined).stopRun({ runId }))).code).toBe(Code.UNAUTHENTICATED);
    expect(await total()).toBe(rowsBefore);

    const rows = await auditRowsOf("operator-key", mark);
    expect(rows.map((r) => [r.action, r.run_id])).toEqual([
      ["StartRun", runId],
      ["StopRun", runId],
      ["ResumeRun", runId],
      ["StopRun", runId],
      ["RetryRun", runId],
      ["CompleteRun", runId],
      ["StopRun", missing],
      ["ResumeRun", null],
    ]);
    expect(rows.map((r) => ({ outcome: r.outcome, message: r.message }))).toEqual(heard);
    expect(heard.slice(0, 3).map((h) => h.outcome)).toEqual(["ok", "ok", "ok"]);
    expect(heard.slice(4).map((h) => h.outcome)).toEqual([
      expect.not.stringMatching(/^ok$/),
      "FAILED_PRECONDITION",
      "NOT_FOUND",
      "INVALID_ARGUMENT",
    ]);
    for (const row of rows) {
      expect(row.key_id).toBe("operator-key");
      expect(row.actor).toBe("operator-key");
      expect(row.scopes).toBe(`tenant:${T2}`);
      expect(row.peer).toMatch(/^(ipv4:)?127\.0\.0\.1:\d+$/);
      expect(new Date(row.at).getTime()).toBeGreaterThanOrEqual(from.getTime());
      expect(new Date(row.at).getTime()).toBeLessThanOrEqual(Date.now());
    }
    expect(rows.slice(0, 6).every((r) => r.tenant_id === T2)).toBe(true);
    // A run that does not exist has no tenant: the row is an admin's to see.
    expect(rows[6]!.tenant_id).toBeNull();
    expect(rows[0]!.details).toEqual({ source: "crm", source_account: "audited", kinds: "organizations" });
    expect(rows[4]!.details).toEqual({ kind: "organizations", reason: "no such reason", source_ids: "7,8" });
    expect(rows[7]!.details).toEqual({ run_id: "not-a-run" });
  });

  it("a refused request's control characters are recorded written out, not lost with the row", async () => {
    const mark = await lastAuditId();
    const err = await rejection(c.client.startRun(startRequest(T2, "a\u0000b\r\n")));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    const [row] = await auditRowsOf("admin-key", mark);
    expect(row).toMatchObject({ action: "StartRun", outcome: "INVALID_ARGUMENT", tenant_id: T2 });
    expect(row!.details.source_account).toBe("a\\u0000b\\u000d\\u000a");
  });

  it("ListAuditEvents shows a tenant its own tenants' events only, filtered and paged", async () => {
    // Another tenant's key probing T's run: NOT_FOUND to it, and recorded under T, where T sees it.
    const other = c.clientWith(c.tokens.other);
    expect((await rejection(other.stopRun({ runId: finished }))).code).toBe(Code.NOT_FOUND);
    expect((await other.listAuditEvents({})).events.every((e) => e.tenantId === O)).toBe(true);
    expect((await other.listAuditEvents({ tenantId: T })).events).toEqual([]);
    expect((await other.listAuditEvents({ runId: finished })).events).toEqual([]);

    const reader = c.clientWith(c.tokens.reader);
    const seen = (await reader.listAuditEvents({ pageSize: 500 })).events;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((e) => e.tenantId === T)).toBe(true);
    expect(
      seen.some((e) => e.keyId === "other-key" && e.action === "StopRun" && e.outcome === "NOT_FOUND"),
    ).toBe(true);
    const reverts = (await reader.listAuditEvents({ runId: finished, action: "RevertRun" })).events;
    expect(reverts.length).toBeGreaterThanOrEqual(5);
    expect(reverts.every((e) => e.runId === finished && e.action === "RevertRun")).toBe(true);
    const future = timestampFromDate(new Date(Date.now() + 60_000));
    expect((await reader.listAuditEvents({ since: future })).events).toEqual([]);

    // Key changes are no tenant's: an admin sees them, a tenant's key does not.
    const io = { env: { DATABASE_URL: c.testDb.url }, out: () => {}, err: () => {} };
    expect(await keysCommand(["issue", "--scope", `read:${T}`, "--id", "audited-key"], io)).toBe(0);
    expect(await keysCommand(["revoke", "audited-key"], io)).toBe(0);
    expect(await keysCommand(["revoke", "audited-key"], io)).toBe(1);
    const keyEvents = (await c.client.listAuditEvents({ pageSize: 500 })).events.filter(
      (e) => e.details.key_id === "audited-key",
    );
    expect(keyEvents.map((e) => [e.action, e.outcome, e.details.scopes ?? ""])).toEqual([
      ["RevokeApiKey", "NOT_FOUND", ""],
      ["RevokeApiKey", "ok", `read:${T}`],
      ["IssueApiKey", "ok", `read:${T}`],
    ]);
    for (const e of keyEvents) {
      expect(e).toMatchObject({ keyId: "", tenantId: "", peer: "local" });
      expect(e.actor).toMatch(/^keys command \(.+@.+\)$/);
    }
    expect((await reader.listAuditEvents({ action: "IssueApiKey" })).events).toEqual([]);

    // Paged newest first, every event once.
    const [count] = await c.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.audit_events`,
    );
    const ids: bigint[] = [];
    let pageToken = "";
    do {
      const page = await c.client.listAuditEvents({ pageSize: 3, pageToken });
      ids.push(...page.events.map((e) => BigInt(e.id)));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(ids.length).toBe(count!.n);
    expect([...ids].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0))).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    const bad = await rejection(c.client.listAuditEvents({ pageToken: "forged" }));
    expect(bad.code).toBe(Code.INVALID_ARGUMENT);
  });

  it("drover audit prints a run's history", async () => {
    const lines: string[] = [];
    const io: Io = { out: (t) => lines.push(t), err: (t) => lines.push(t), isTty: false };
    let code: number;
    try {
      code = await runCommand("audit", [finished, "--action", "RevertRun"], c.client, io, {});
    } catch (err) {
      code = describeFailure(err).code;
    }
    expect(code).toBe(0);
    const out = lines.join("\n");
    expect(out).toMatch(/RevertRun/);
    expect(out).toMatch(/reverter-key/);
    expect(out).toMatch(/PERMISSION_DENIED/);
    expect(out).not.toMatch(/StopRun/);
  });
});

describe("the audit table", { timeout: 60_000 }, () => {
  it("is append-only: UPDATE, DELETE and TRUNCATE are refused, and so is a prune of recent rows", async () => {
    const db = c.database.db;
    await expect(db.execute(sql`update drover.audit_events set outcome = 'ok'`)).rejects.toThrow();
    await expect(db.execute(sql`delete from drover.audit_events`)).rejects.toThrow();
    await expect(db.execute(sql`truncate drover.audit_events`)).rejects.toThrow();
    // The retention job's door, pointed at now: nothing under a day old goes.
    await expect(
      db.transaction(async (tx) => {
        await tx.execute(sql`select set_config('drover.audit_prune_before', now()::text, true)`);
        await tx.execute(sql`delete from drover.audit_events`);
      }),
    ).rejects.toThrow();
    const err = await db.execute(sql`update drover.audit_events set outcome = 'ok'`).catch((e: unknown) => e);
    expect(String((err as { cause?: unknown }).cause ?? err)).toMatch(/append-only: UPDATE is refused/);
    const [refused] = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.audit_events where outcome <> 'ok'`,
    );
    expect(refused!.n).toBeGreaterThan(0);
  });

  it("retention removes events older than DROVER_RETENTION_DAYS and keeps the rest", async () => {
    const db = c.database.db;
    const insert = (days: number, action: string) =>
      db.execute(sql`
        insert into drover.audit_events (at, key_id, actor, action, peer, outcome)
        values (now() - make_interval(days => ${days}), 'old-key', 'old-key', ${action}, 'test', 'ok')`);
    await insert(91, "OldStop");
    await insert(89, "RecentStop");
    // The leader's reaper prunes on each pass (DROVER_RETENTION_DAYS defaults to 90).
    await until(
      async () =>
        (
          await db.execute<{ action: string }>(
            sql`select action from drover.audit_events where key_id = 'old-key' and action = 'OldStop'`,
          )
        ).length === 0,
      20_000,
      "the 91-day-old audit event to be pruned",
    );
    const left = await db.execute<{ action: string }>(
      sql`select action from drover.audit_events where key_id = 'old-key'`,
    );
    expect(left.map((r) => r.action)).toEqual(["RecentStop"]);
  });
});
