import { randomUUID } from "node:crypto";
import { Code, GetRunResponseSchema, ListRunsResponseSchema, RunStatus, toJson } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN,
  type Cluster,
  rejection,
  SETTINGS,
  startCluster,
  until,
  untilFinished,
} from "../support/in-process.js";

let c: Cluster;
/** Runs a test left live; stopped after each test so a later worker does not pick them up. */
const started: string[] = [];

beforeAll(async () => {
  c = await startCluster({ workers: 0 });
});
afterAll(async () => {
  await c?.close();
});
afterEach(async () => {
  for (const runId of started.splice(0)) {
    await c.client.stopRun({ runId }).catch(() => {});
  }
});

const tenant = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

async function start(tenantId: string, kinds: string[] = [], account = "acct") {
  const run = await c.start(tenantId, kinds, account);
  started.push(run.id);
  return run;
}

async function count(table: "runs" | "tasks"): Promise<number> {
  const [row] = await c.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from ${sql.identifier("drover")}.${sql.identifier(table)}`,
  );
  return row!.n;
}

async function taskStatuses(runId: string): Promise<Record<string, number>> {
  const rows = await c.database.db.execute<{ status: string; n: number }>(
    sql`select status, count(*)::int as n from drover.tasks where run_id = ${runId}::uuid group by status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe("RunService", { timeout: 60_000 }, () => {
  describe("eta", () => {
    it("GetRun carries a running run's ETA against its account's budget: the work left, paced, and the daily resets it waits for", async () => {
      const account = `eta-${randomUUID().slice(0, 8)}`;
      const { run } = await c.client.startRun({
        tenantId: tenant("eta"),
        source: "crm",
        sourceAccount: account,
        kinds: ["organizations", "persons"],
        // A day's allowance of 10 tokens: two v2 list calls (10 tokens each) need more than a day.
        sourceConfig: {
          baseUrl: c.sandbox.url,
          apiToken: API_TOKEN,
          settings: { ...SETTINGS, dailyTokens: "10" },
        },
      });
      started.push(run!.id);
      // The account as a worker's reports left it: 5 tokens left today, renewed in an hour.
      await c.database.db.execute(sql`
        insert into drover.budgets (source, source_account, burst_capacity, daily_remaining, daily_reset_at)
        values ('crm', ${account}, 20, 5, now() + interval '1 hour')`);
      const { run: live } = await c.client.getRun({ runId: run!.id });
      // No worker: one pending page task per kind (v2 lists are one chain each), their ends unknown.
      expect(live!.eta).toMatchObject({
        requestsLeft: 2n,
        tokensLeft: 20n,
        atLeast: true,
        // 5 today, then 10 a day: 15 more tokens take two resets.
        dailyResets: 2,
        text: "at least about 1 day 1 hour",
      });
      expect(Number(live!.eta!.seconds)).toBeGreaterThan(86_400 + 3_500);
      // A run that ended has none.
      await c.client.stopRun({ runId: run!.id });
      const stopped = await until(async () => {
        const { run: r } = await c.client.getRun({ runId: run!.id });
        return r?.status === RunStatus.STOPPED ? r : undefined;
      });
      expect(stopped.eta).toBeUndefined();
    });
  });

  describe("admission", () => {
    it("answers ALREADY_EXISTS naming the live run when the same tenant and source account start again", async () => {
      const t = tenant("adm");
      const first = await start(t);
      const err = await rejection(c.start(t));
      expect(err.code).toBe(Code.ALREADY_EXISTS);
      expect(err.message).toContain(first.id);
      // The edge's one table (rpc-status.ts): a stable reason beside the value it names.
      expect(err.details).toMatchObject({ reason: "LIVE_RUN_EXISTS", run_id: first.id });
    });

    it("admits a different tenant on the same source account", async () => {
      const first = await start(tenant("adm-a"));
      const second = await start(tenant("adm-b"));
      expect(second.id).not.toBe(first.id);
      expect(second.status).toBe(RunStatus.RUNNING);
    });

    it("admits exactly one of two StartRuns racing for the same tenant and source account", async () => {
      const t = tenant("race");
      const results = await Promise.allSettled([c.start(t), c.start(t), c.start(t)]);
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r) => r.status === "rejected");
      for (const w of won) started.push(w.value.id);
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(2);
      for (const l of lost) {
        expect(l.reason.code).toBe(Code.ALREADY_EXISTS);
        expect(l.reason.message).toContain(won[0]!.value.id);
      }
      const [live] = await c.database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from drover.runs where tenant_id = ${t}`,
      );
      expect(live!.n).toBe(1);
    });

    it("refuses to resume a stopped run while another run holds its tenant and source account", async () => {
      const t = tenant("resume-conflict");
      const a = await start(t);
      await c.client.stopRun({ runId: a.id });
      await until(
        async () => (await c.client.getRun({ runId: a.id })).run!.status === RunStatus.STOPPED,
        10_000,
      );
      const b = await start(t);
      const err = await rejection(c.client.resumeRun({ runId: a.id }));
      expect(err.code).toBe(Code.ALREADY_EXISTS);
      expect(err.message).toContain(b.id);
      expect((await c.client.getRun({ runId: a.id })).run!.status).toBe(RunStatus.STOPPED);
    });
  });

  describe("bad input", () => {
    const good = () => ({
      tenantId: tenant("bad"),
      source: "crm",
      sourceAccount: "acct",
      kinds: [] as string[],
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: { ...SETTINGS } },
    });
    const cases: [string, (r: ReturnType<typeof good>) => void, RegExp][] = [
      ["an empty tenant", (r) => (r.tenantId = ""), /tenant_id is required/],
      ["an oversized tenant id", (r) => (r.tenantId = "t".repeat(200)), /tenant_id must be 1-128 characters/],
      [
        "an unknown source",
        (r) => (r.source = "salesforce"),
        /unknown source "salesforce".*known sources: crm/,
      ],
      [
        "an unknown kind",
        (r) => (r.kinds = ["persons", "widgets"]),
        /unknown kind\(s\) "widgets".*allowed kinds: organizations/,
      ],
      [
        "a base_url that is not a URL",
        (r) => (r.sourceConfig.baseUrl = "not a url"),
        /base_url "not a url" is not a URL/,
      ],
      ["a missing api_token", (r) => (r.sourceConfig.apiToken = ""), /api_token is required/],
      [
        "absurd settings",
        (r) => (r.sourceConfig.settings.stripes = "1000"),
        /stripes must be an integer from 1 to 64, got "1000"/,
      ],
      [
        "an unknown setting",
        (r) => Object.assign(r.sourceConfig.settings, { turbo: "1" }),
        /unknown crm setting "turbo"/,
      ],
    ];
    it.each(cases)(
      "StartRun with %s answers INVALID_ARGUMENT saying what to fix and writes nothing",
      async (_name, spoil, message) => {
        const [runsBefore, tasksBefore] = [await count("runs"), await count("tasks")];
        const request = good();
        spoil(request);
        const err = await rejection(c.client.startRun(request));
        expect(err.code).toBe(Code.INVALID_ARGUMENT);
        expect(err.message).toMatch(message);
        expect([await count("runs"), await count("tasks")]).toEqual([runsBefore, tasksBefore]);
      },
    );

    it("GetRun with an id that is not a UUID answers INVALID_ARGUMENT", async () => {
      const err = await rejection(c.client.getRun({ runId: "run-42" }));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.message).toMatch(/run_id must be a UUID/);
    });

    it("GetRun, StopRun and ResumeRun of an unknown run answer NOT_FOUND", async () => {
      const runId = randomUUID();
      const calls = [
        () => c.client.getRun({ runId }),
        () => c.client.stopRun({ runId }),
        () => c.client.resumeRun({ runId }),
      ];
      for (const call of calls) {
        const err = await rejection(call());
        expect(err.code).toBe(Code.NOT_FOUND);
        expect(err.message).toContain(runId);
      }
    });

    it("VerifyRun of an unknown run answers NOT_FOUND", async () => {
      const runId = randomUUID();
      const err = await rejection(c.client.verifyRun({ runId }));
      expect(err.code).toBe(Code.NOT_FOUND);
      expect(err.message).toContain(runId);
    });
  });

  describe("plan", () => {
    it("a run asking for organizations and persons gets one phase holding both, then the catch-up pass", async () => {
      const run = await start(tenant("plan-one"), ["organizations", "persons"]);
      expect(run.phases.map((p) => p.kinds)).toEqual([["organizations", "persons"], ["catch-up"]]);
      expect(run.progress.map((p) => p.kind)).toEqual(["organizations", "persons", "catch-up"]);
      const [kinds] = await c.database.db.execute<{ kinds: string[] }>(
        sql`select array_agg(distinct kind order by kind) as kinds from drover.tasks where run_id = ${run.id}::uuid`,
      );
      expect(kinds!.kinds).toEqual(["organizations", "persons"]);
    });

    it("a run asking for no kinds gets all five crm phases, the catch-up pass last", async () => {
      const run = await start(tenant("plan-all"), []);
      expect(run.phases.map((p) => p.kinds)).toEqual([
        ["organizations", "persons"],
        ["deals", "leads"],
        ["activities", "notes"],
        ["mail"],
        ["catch-up"],
      ]);
      expect(run.currentPhase).toBe(0);
    });

    it("a run asking for kinds of later phases only gets just those phases, and the catch-up pass", async () => {
      const run = await start(tenant("plan-late"), ["notes", "deals"]);
      expect(run.phases.map((p) => p.kinds)).toEqual([["deals"], ["notes"], ["catch-up"]]);
    });
  });

  describe("stop and resume", () => {
    it("StopRun cancels the pending tasks of a running run and the run ends stopped", async () => {
      const run = await start(tenant("stop"));
      expect((await taskStatuses(run.id)).pending).toBeGreaterThan(0);
      const { run: stopping } = await c.client.stopRun({ runId: run.id });
      // Nothing was running, so the stop settles at once.
      expect(stopping!.status).toBe(RunStatus.STOPPED);
      expect(await taskStatuses(run.id)).toEqual({ cancelled: expect.any(Number) });
      expect(stopping!.tasks!.cancelled).toBeGreaterThan(0n);
      expect(stopping!.tasks!.pending).toBe(0n);
    });

    it("StopRun on a succeeded run answers FAILED_PRECONDITION naming its state", async () => {
      const [row] = await c.database.db.execute<{ id: string }>(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, started_at, finished_at)
        values (${tenant("done")}, 'crm', 'acct', '{organizations}', '[["organizations"]]', 'succeeded', now(), now())
        returning id`);
      const err = await rejection(c.client.stopRun({ runId: row!.id }));
      expect(err.code).toBe(Code.FAILED_PRECONDITION);
      expect(err.message).toMatch(/succeeded/);
    });

    it("ResumeRun on a running run answers FAILED_PRECONDITION naming its state", async () => {
      const run = await start(tenant("resume-running"));
      const err = await rejection(c.client.resumeRun({ runId: run.id }));
      expect(err.code).toBe(Code.FAILED_PRECONDITION);
      expect(err.message).toMatch(/is running; only a stopped run can be resumed/);
    });

    it("ResumeRun and RetryRun of a run whose tasks were pruned answer FAILED_PRECONDITION and change nothing", async () => {
      for (const status of ["stopped", "failed"] as const) {
        const [row] = await c.database.db.execute<{ id: string }>(sql`
          insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, started_at, finished_at, summary)
          values (${tenant(`pruned-${status}`)}, 'crm', 'acct', '{organizations}', '[["organizations"]]', ${status},
                  now(), now(), '{"kinds": {}, "tasks": {}}'::jsonb)
          returning id`);
        const call = status === "stopped" ? c.client.resumeRun : c.client.retryRun;
        const err = await rejection(call({ runId: row!.id }));
        expect(err.code).toBe(Code.FAILED_PRECONDITION);
        expect(err.message).toMatch(/pruned/);
        const [after] = await c.database.db.execute<{ status: string }>(
          sql`select status from drover.runs where id = ${row!.id}`,
        );
        expect(after!.status).toBe(status);
      }
    });

    it("ResumeRun re-arms the cancelled tasks, puts the run back to running, and a worker then finishes it", async () => {
      const run = await start(tenant("resume"), ["organizations", "persons", "deals"]);
      const seeded = Object.values(await taskStatuses(run.id)).reduce((a, b) => a + b, 0);
      await c.client.stopRun({ runId: run.id });
      expect(await taskStatuses(run.id)).toEqual({ cancelled: seeded });

      const { run: resumed } = await c.client.resumeRun({ runId: run.id });
      expect(resumed!.status).toBe(RunStatus.RUNNING);
      expect(await taskStatuses(run.id)).toEqual({ pending: seeded });

      const worker = await c.addWorker();
      try {
        const done = await untilFinished(c, run.id);
        expect(done.status).toBe(RunStatus.SUCCEEDED);
        expect(done.progress.find((p) => p.kind === "organizations")!.imported).toBe(60n);
        expect(done.progress.find((p) => p.kind === "deals")!.imported).toBe(80n);
      } finally {
        await worker.stop();
      }
    });
  });

  describe("ListRuns", () => {
    it("filters by tenant and pages with page_token without repeats or gaps", async () => {
      const t = tenant("list");
      // One statement: the five share created_at to the microsecond, so only the id orders them.
      const same = await c.database.db.execute<{ id: string }>(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, started_at, finished_at)
        select ${t}, 'crm', 'acct-' || i, '{organizations}', '[["organizations"]]', 'succeeded', now(), now()
          from generate_series(1, 5) i
        returning id`);
      // And three more at distinct instants, a millisecond or more apart.
      const spread: string[] = [];
      for (let i = 0; i < 3; i++) {
        const [row] = await c.database.db.execute<{ id: string }>(sql`
          insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, created_at)
          values (${t}, 'crm', ${`spread-${i}`}, '{organizations}', '[["organizations"]]', 'stopped',
                  clock_timestamp() + make_interval(secs => ${i} * 0.0013))
          returning id`);
        spread.push(row!.id);
      }
      const other = await start(tenant("list-other"));

      const seen: string[] = [];
      let pageToken = "";
      let pages = 0;
      do {
        const page = await c.client.listRuns({ tenantId: t, pageSize: 2, pageToken });
        expect(page.runs.length).toBeLessThanOrEqual(2);
        for (const r of page.runs) expect(r.tenantId).toBe(t);
        seen.push(...page.runs.map((r) => r.id));
        pageToken = page.nextPageToken;
        pages++;
        expect(pages).toBeLessThan(10);
      } while (pageToken);

      expect(seen).toHaveLength(8);
      expect(new Set(seen).size).toBe(8);
      expect(new Set(seen)).toEqual(new Set([...same.map((r) => r.id), ...spread]));
      expect(seen).not.toContain(other.id);
      // Newest first.
      expect(seen.slice(0, 3)).toEqual([...spread].reverse());
    });

    it("filters by status", async () => {
      const t = tenant("list-status");
      await c.database.db.execute(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status)
        values (${t}, 'crm', 'a', '{organizations}', '[["organizations"]]', 'failed'),
               (${t}, 'crm', 'b', '{organizations}', '[["organizations"]]', 'succeeded')`);
      const { runs } = await c.client.listRuns({ tenantId: t, statuses: [RunStatus.FAILED] });
      expect(runs.map((r) => r.sourceAccount)).toEqual(["a"]);
    });

    it("rejects a page token it did not issue", async () => {
      const err = await rejection(c.client.listRuns({ pageToken: "garbage" }));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.message).toMatch(/page_token/);
    });
  });

  describe("ListNotes", () => {
    it("groups a run's notes by reason with counts and sample subject ids", async () => {
      const [run] = await c.database.db.execute<{ id: string }>(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status)
        values (${tenant("notes")}, 'crm', 'acct', '{persons,deals}', '[["persons"],["deals"]]', 'succeeded')
        returning id`);
      const runId = run!.id;
      await c.database.db.execute(sql`
        insert into drover.notes (run_id, level, kind, subject_id, reason)
        select ${runId}::uuid, 'error', 'persons', (100 + i)::text, 'email is not an address'
          from generate_series(1, 7) i
        union all
        select ${runId}::uuid, 'warn', 'deals', (200 + i)::text, 'not linked to any record'
          from generate_series(1, 3) i
        union all
        select ${runId}::uuid, 'error', 'deals', null, 'page failed'`);

      const { groups } = await c.client.listNotes({ runId });
      expect(groups.map((g) => [g.level, g.kind, g.reason, g.count])).toEqual([
        ["error", "persons", "email is not an address", 7n],
        ["warn", "deals", "not linked to any record", 3n],
        ["error", "deals", "page failed", 1n],
      ]);
      expect(groups[0]!.sampleSubjectIds).toEqual(["101", "102", "103", "104", "105"]);
      expect(groups[1]!.sampleSubjectIds).toEqual(["201", "202", "203"]);
      expect(groups[2]!.sampleSubjectIds).toEqual([]);

      const errorsOnly = await c.client.listNotes({ runId, level: "error", kind: "persons", samples: 2 });
      expect(errorsOnly.groups).toHaveLength(1);
      expect(errorsOnly.groups[0]!.sampleSubjectIds).toEqual(["101", "102"]);

      const err = await rejection(c.client.listNotes({ runId, level: "fatal" }));
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      // An unknown kind is refused as RetryRun and ExplainRecord refuse it, not answered with no groups.
      const unknownKind = await rejection(c.client.listNotes({ runId, kind: "persns" }));
      expect(unknownKind.code).toBe(Code.INVALID_ARGUMENT);
      expect(unknownKind.message).toContain('unknown kind "persns" for source crm');
    });
  });

  describe("WatchRun", () => {
    it("streams updates of a real run and ends when the run reaches a terminal status", async () => {
      const worker = await c.addWorker();
      try {
        const run = await start(tenant("watch"), ["organizations", "persons", "deals", "leads"]);
        const updates = [];
        for await (const u of c.client.watchRun({ runId: run.id })) updates.push(u.run!);
        const last = updates[updates.length - 1]!;
        expect(last.status).toBe(RunStatus.SUCCEEDED);
        expect(updates.length).toBeGreaterThan(1);
        expect(updates.slice(0, -1).every((u) => u.status === RunStatus.RUNNING)).toBe(true);
        // Counts only grow, and the phase only moves forward.
        for (let i = 1; i < updates.length; i++) {
          expect(updates[i]!.currentPhase).toBeGreaterThanOrEqual(updates[i - 1]!.currentPhase);
          for (const [k, p] of updates[i]!.progress.entries()) {
            expect(p.imported).toBeGreaterThanOrEqual(updates[i - 1]!.progress[k]!.imported);
          }
        }
        expect(last.progress.map((p) => [p.kind, p.imported])).toEqual([
          ["organizations", 60n],
          ["persons", expect.any(BigInt)],
          ["deals", 80n],
          ["leads", 30n],
          // Nothing changed in the source while the run lasted: the catch-up pass finds nothing.
          ["catch-up", 0n],
        ]);
      } finally {
        await worker.stop();
      }
    });

    it("WatchRun of a finished run sends its state once and ends", async () => {
      const [row] = await c.database.db.execute<{ id: string }>(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status)
        values (${tenant("watch-done")}, 'crm', 'acct', '{organizations}', '[["organizations"]]', 'failed')
        returning id`);
      const updates = [];
      for await (const u of c.client.watchRun({ runId: row!.id })) updates.push(u.run!.status);
      expect(updates).toEqual([RunStatus.FAILED]);
    });
  });

  describe("secrets", () => {
    it("the api_token given to StartRun never appears in any response", async () => {
      const t = tenant("secret");
      const { run } = await c.client.startRun({
        tenantId: t,
        source: "crm",
        sourceAccount: "acct",
        kinds: ["organizations"],
        sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      });
      started.push(run!.id);
      // It is stored encrypted, for workers to use...
      const [stored] = await c.database.db.execute<{
        source_secret: string | null;
        source_secret_ciphertext: string;
        source_secret_key_id: string;
      }>(
        sql`select source_secret, source_secret_ciphertext, source_secret_key_id from drover.runs where id = ${run!.id}::uuid`,
      );
      expect(stored!.source_secret).toBeNull();
      expect(stored!.source_secret_key_id).toBe("test");
      expect(stored!.source_secret_ciphertext).not.toContain(API_TOKEN);
      // ...and never shown.
      const responses = [
        JSON.stringify(toJson(GetRunResponseSchema, await c.client.getRun({ runId: run!.id }))),
        JSON.stringify(toJson(ListRunsResponseSchema, await c.client.listRuns({ tenantId: t }))),
        JSON.stringify(toJson(ListRunsResponseSchema, await c.client.listRuns({}))),
        JSON.stringify(run, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
      ];
      for (const text of responses) {
        expect(text).toContain(run!.id);
        expect(text).not.toContain(API_TOKEN);
      }
      const stopped = await c.client.stopRun({ runId: run!.id });
      expect(JSON.stringify(stopped, (_k, v) => (typeof v === "bigint" ? v.toString() : v))).not.toContain(
        API_TOKEN,
      );
    });
  });
});
