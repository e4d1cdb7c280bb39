import { createServer, request, type Server } from "node:http";
import { type Sandbox, startSandbox } from "@drover/crm-sandbox";
import { Code, type Run, RunStatus, timestampDate } from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Cluster,
  rejection,
  SMALL_ACCOUNT,
  startCluster,
  untilFinished,
  untilVerifiedAfter,
} from "../support/in-process.js";

/**
 * Re-drive by reason: a first run against a sandbox that malforms a tenth of the rows, then the
 * same account (same seed) served clean, and RetryRun with one reason group. Requests are counted
 * at the source by a proxy on the run's source address; product rows and the run's counts are
 * compared before and after. The account's mail list does not carry bodies (fetch mode: one GET per
 * message), so a mail re-drive shows both its list and its body requests.
 */

const SEED = 4242;
/** Bodies only by one GET per message, as before 2026: the mail phase's (and a mail re-drive's) costliest mode. */
const FETCH_MODE = { listIncludeBody: 0 };
const TABLES: Record<string, string> = {
  organizations: "companies",
  persons: "contacts",
  deals: "deals",
  leads: "leads",
  activities: "activities",
  notes: "notes",
  mail: "emails",
};

interface Logged {
  at: number;
  method: string;
  path: string;
  params: URLSearchParams;
}

let c: Cluster;
let clean: Sandbox | undefined;
let proxy: Server | undefined;
const log: Logged[] = [];

beforeAll(async () => {
  c = await startCluster({ sandbox: { seed: SEED, malformedRate: 0.1, ...FETCH_MODE }, workers: 1 });
});
afterAll(async () => {
  await new Promise((resolve) => (proxy ? proxy.close(resolve) : resolve(undefined)));
  proxy?.closeAllConnections();
  await c?.close();
  await clean?.close();
});

/**
 * The account as the customer fixed it: the same seed served without malformed rows, behind a
 * proxy on the first sandbox's port (the address the run keeps) that logs every request.
 */
async function serveFixedAccount(): Promise<void> {
  const port = c.sandbox.port;
  await c.sandbox.close();
  clean = await startSandbox({ ...SMALL_ACCOUNT, seed: SEED, ...FETCH_MODE });
  const target = new URL(clean.url);
  proxy = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    log.push({ at: Date.now(), method: req.method ?? "", path: url.pathname, params: url.searchParams });
    const out = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => proxy!.listen(port, "127.0.0.1", resolve));
}

async function tableCounts(tenantId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [kind, table] of Object.entries(TABLES)) {
    const [row] = await c.database.sql.unsafe<{ n: number }[]>(
      `select count(*)::int as n from app.${table} where tenant_id = $1`,
      [tenantId],
    );
    out[kind] = row!.n;
  }
  return out;
}

async function ledgerCount(runId: string): Promise<number> {
  const [row] = await c.database.sql<{ n: number }[]>`
    select count(*)::int as n from drover.ledger where run_id = ${runId}::uuid`;
  return row!.n;
}

const progressOf = (run: Run, kind: string) => run.progress.find((p) => p.kind === kind)!;

const untilVerified = (runId: string, after: Date) => untilVerifiedAfter(c, runId, after);

const V2_KINDS = ["organizations", "persons", "deals", "activities"];

interface Slot {
  source_id: string;
  action: string;
}

async function slotsOf(kind: string, ids: readonly string[]): Promise<Map<string, string>> {
  const rows = await c.database.sql<Slot[]>`
    select source_id, action from drover.ledger
     where tenant_id = 'redrive' and kind = ${kind} and source_id = any(${ids as string[]}::text[])`;
  return new Map(rows.map((r) => [r.source_id, r.action]));
}

/**
 * The source was asked for exactly these rows: a hundred a request on a v2 list's `ids` filter
 * where that costs fewer tokens than a GET each (more than ten rows; what it leaves out, an
 * archived deal, by id or through the archived list's own `ids`), else and on a v1 kind one GET by id.
 */
function askedById(requests: readonly Logged[], kind: string, ids: readonly string[]): void {
  const batched = requests.filter((r) => r.params.has("ids"));
  const single = requests.filter((r) => !r.params.has("ids"));
  for (const r of batched) expect([`/api/v2/${kind}`, `/api/v2/${kind}/archived`]).toContain(r.path);
  const byId = single.map((r) => {
    const m = new RegExp(`^/(?:v1|api/v2)/${kind}/([^/]+)$`).exec(r.path);
    expect(m, `${r.method} ${r.path} reads one row of ${kind}`).not.toBeNull();
    return decodeURIComponent(m![1]!);
  });
  expect(new Set(byId).size).toBe(byId.length);
  const asked = new Set([...batched.flatMap((r) => r.params.get("ids")!.split(",")), ...byId]);
  expect([...asked].sort()).toEqual([...ids].sort());
  const listed = batched.filter((r) => r.path === `/api/v2/${kind}`);
  if (V2_KINDS.includes(kind)) expect(listed).toHaveLength(ids.length > 10 ? Math.ceil(ids.length / 100) : 0);
  else expect(single).toHaveLength(ids.length);
}

/**
 * Re-drives `filter` on the run, whose rows of `kind` are `ids`, and checks what it did: the source
 * asked for exactly those rows, the ledger and product tables changed by those rows only, and the
 * run's counts moved each from its old outcome to its new one. Waits for the finish's verification
 * so that the next re-drive's requests are its own.
 */
async function redriveAndCheck(
  runId: string,
  filter: { kind?: string; reason?: string; sourceIds?: string[] },
  kind: string,
  ids: readonly string[],
  checkRequests: (requests: readonly Logged[], kind: string, ids: readonly string[]) => void = askedById,
): Promise<{ before: Map<string, string>; after: Map<string, string> }> {
  const tablesBefore = await tableCounts("redrive");
  const ledgerBefore = await ledgerCount(runId);
  const before = (await c.client.getRun({ runId })).run!;
  const slotsBefore = await slotsOf(kind, ids);
  const logged = log.length;

  const { run: retried } = await c.client.retryRun({ runId, ...filter });
  expect([RunStatus.RUNNING, RunStatus.SUCCEEDED]).toContain(retried!.status);
  const after = await untilFinished(c, runId, 60_000);
  expect(after.status).toBe(RunStatus.SUCCEEDED);
  const finishedAt = timestampDate(after.finishedAt!);
  await untilVerified(runId, finishedAt);

  // Requests after the finish are its verification's.
  checkRequests(
    log.slice(logged).filter((r) => r.at <= finishedAt.getTime()),
    kind,
    ids,
  );

  // Each row has one ledger slot now; only rows that had none added one, and only rows created
  // now added a product record, of this kind's table alone.
  const slotsAfter = await slotsOf(kind, ids);
  expect(slotsAfter.size).toBe(ids.length);
  const gained = ids.filter((id) => !slotsBefore.has(id)).length;
  expect(await ledgerCount(runId)).toBe(ledgerBefore + gained);
  const createdNow = ids.filter(
    (id) => slotsAfter.get(id) === "created" && slotsBefore.get(id) !== "created",
  ).length;
  expect(await tableCounts("redrive")).toEqual({
    ...tablesBefore,
    [kind]: tablesBefore[kind]! + createdNow,
  });

  // The run's counts: each row moved from its old outcome (failed: no slot; skipped) to its new one.
  const imported = (m: Map<string, string>, id: string) => m.get(id) === "created" || m.get(id) === "matched";
  const was = progressOf(before, kind);
  const now = progressOf(after, kind);
  const failedFixed = ids.filter((id) => !slotsBefore.has(id) && slotsAfter.has(id)).length;
  const skippedTaken = ids.filter(
    (id) => slotsBefore.get(id) === "skipped" && imported(slotsAfter, id),
  ).length;
  const failedSkipped = ids.filter((id) => !slotsBefore.has(id) && slotsAfter.get(id) === "skipped").length;
  const newlyImported = ids.filter((id) => !imported(slotsBefore, id) && imported(slotsAfter, id)).length;
  expect(now.failed).toBe(was.failed - BigInt(failedFixed));
  expect(now.skipped).toBe(was.skipped - BigInt(skippedTaken) + BigInt(failedSkipped));
  expect(now.imported + now.matched).toBe(was.imported + was.matched + BigInt(newlyImported));
  for (const p of after.progress.filter((p) => p.kind !== kind))
    expect(p).toMatchObject({
      ...progressOf(before, p.kind),
      tasksTotal: p.tasksTotal,
      tasksDone: p.tasksDone,
    });
  return { before: slotsBefore, after: slotsAfter };
}

const noted = async (runId: string, level: string, kind: string, reason?: string): Promise<string[]> =>
  (
    await c.database.sql<{ subject_id: string }[]>`
      select distinct subject_id from drover.notes
       where run_id = ${runId}::uuid and level = ${level} and kind = ${kind}
         ${reason === undefined ? c.database.sql`` : c.database.sql`and reason = ${reason}`}`
  ).map((r) => r.subject_id);

/** The deals of the tasks whose notes about these messages hold: where a mail re-drive lists them again. */
async function notingDeals(runId: string, ids: readonly string[]): Promise<Set<string>> {
  const rows = await c.database.sql<{ deals: string[] }[]>`
    select distinct on (n.subject_id) t.cursor -> 'deals' as deals
      from drover.notes n join drover.tasks t on t.id = n.task_id
     where n.run_id = ${runId}::uuid and n.kind = 'mail' and n.subject_id = any(${ids as string[]}::text[])
     order by n.subject_id, n.id desc`;
  return new Set(rows.flatMap((r) => r.deals));
}

const skippedBy = async (runId: string, kind: string): Promise<string[]> =>
  (
    await c.database.sql<{ source_id: string }[]>`
      select source_id from drover.ledger where run_id = ${runId}::uuid and kind = ${kind} and action = 'skipped'`
  ).map((r) => r.source_id);

describe("RetryRun with a filter (re-drive)", { timeout: 240_000 }, () => {
  it("re-drives by reason, by kind and by ids: exactly those rows are read again, failed ones imported once, skipped placeholders taken over", async () => {
    const first = await c.start("redrive");
    const done = await untilFinished(c, first.id, 90_000);
    expect(done.status).toBe(RunStatus.SUCCEEDED);
    await untilVerified(first.id, timestampDate(done.finishedAt!));
    await serveFixedAccount();

    // By reason: one reason group of a v2 kind; every other group is left as it was.
    const { groups } = await c.client.listNotes({ runId: first.id, level: "error" });
    const group = groups.find((g) => V2_KINDS.includes(g.kind) && g.count >= 2n)!;
    expect(group, "a reason group of malformed rows").toBeDefined();
    const others = groups.filter((g) => g !== group);
    expect(others.length, "other reason groups, to be left alone").toBeGreaterThan(0);
    const ids = await noted(first.id, "error", group.kind, group.reason);
    expect(BigInt(ids.length)).toBe(group.count);
    const byReason = await redriveAndCheck(
      first.id,
      { kind: group.kind, reason: group.reason },
      group.kind,
      ids,
    );
    expect(
      ids.every((id) => byReason.after.get(id) === "created" || byReason.after.get(id) === "matched"),
    ).toBe(true);
    const { groups: left } = await c.client.listNotes({ runId: first.id, level: "error" });
    expect(left.map((g) => [g.kind, g.reason, g.count])).toEqual(
      others.map((g) => [g.kind, g.reason, g.count]),
    );
    // The same reason again matches nothing: its rows are imported.
    const again = await rejection(
      c.client.retryRun({ runId: first.id, kind: group.kind, reason: group.reason }),
    );
    expect(again.code).toBe(Code.FAILED_PRECONDITION);
    expect(again.message).toContain("no row of run");

    // By kind: every failed row left of each parent kind, v1 leads among them (GET by id).
    for (const kind of ["organizations", "persons", "deals", "leads"]) {
      // What the kind filter takes: rows that failed and still have no slot, and this run's skipped ones.
      const failed = await noted(first.id, "error", kind);
      const held = await slotsOf(kind, failed);
      const open = [...failed.filter((id) => !held.has(id)), ...(await skippedBy(first.id, kind))];
      if (open.length === 0) continue;
      await redriveAndCheck(first.id, { kind }, kind, open);
    }

    // By ids: activities the first run skipped as linked to no record. Those whose parent was a
    // malformed row imported just now are taken over (the slot becomes created, no new slot); the
    // orphans stay skipped.
    const skipped = await skippedBy(first.id, "activities");
    expect(skipped.length).toBeGreaterThan(0);
    const byIds = await redriveAndCheck(
      first.id,
      { kind: "activities", sourceIds: skipped },
      "activities",
      skipped,
    );
    const taken = skipped.filter((id) => byIds.after.get(id) === "created");
    expect(taken.length, "skipped activities whose parent is imported now").toBeGreaterThan(0);

    // Mail, read by listing: a message's GET names no deal, so the deals of the task that noted it
    // are listed again, and only the messages asked for get their body (one GET each in fetch
    // mode). Malformed messages are imported now; those skipped under a deal that failed and is
    // imported now are taken over.
    const failedMail = await noted(first.id, "error", "mail");
    const heldMail = await slotsOf("mail", failedMail);
    const openMail = [
      ...failedMail.filter((id) => !heldMail.has(id)),
      ...(await skippedBy(first.id, "mail")),
    ];
    expect(failedMail.length, "malformed messages").toBeGreaterThan(0);
    const units = await notingDeals(first.id, openMail);
    const byMail = await redriveAndCheck(first.id, { kind: "mail" }, "mail", openMail, (requests) => {
      const listed = requests.map((r) => /^\/v1\/deals\/(\d+)\/mailMessages$/.exec(r.path)?.[1]);
      const bodies = requests.map((r) => /^\/v1\/mailbox\/mailMessages\/(\d+)$/.exec(r.path)?.[1]);
      for (const [i, r] of requests.entries())
        expect(
          listed[i] ?? bodies[i],
          `${r.method} ${r.path} lists a deal's mail or reads a body`,
        ).toBeDefined();
      // Only the noting tasks' deals are listed, none of them twice.
      const deals = listed.filter((d) => d !== undefined);
      expect(new Set(deals).size).toBe(deals.length);
      for (const d of deals) expect(units.has(d!), `deal ${d} held a message asked for`).toBe(true);
      expect(
        requests.every((r) => !/^\/v1\/deals\//.test(r.path) || r.params.get("include_body") === null),
        "fetch mode: the list is not asked for bodies",
      ).toBe(true);
      const fetched = bodies.filter((b) => b !== undefined);
      expect([...fetched].sort()).toEqual([...openMail].sort());
    });
    expect(
      failedMail.every((id) => byMail.after.get(id) === "created"),
      "every malformed message is imported",
    ).toBe(true);
    const linked = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from app.emails e join drover.ledger l on l.record_id = e.id
       where l.tenant_id = 'redrive' and l.kind = 'mail' and l.record_type = 'email'
         and l.source_id = any(${failedMail}::text[]) and e.deal_id is not null and e.body is not null`;
    expect(
      linked[0]!.n,
      "re-driven messages are linked to their deal, with a body where one exists",
    ).toBeGreaterThan(0);
  });

  it("refuses a filter it cannot serve, saying why", async () => {
    const { runs } = await c.client.listRuns({ tenantId: "redrive" });
    const runId = runs[0]!.id;
    const notAKind = await rejection(c.client.retryRun({ runId, kind: "widgets" }));
    expect(notAKind.code).toBe(Code.INVALID_ARGUMENT);
    expect(notAKind.message).toContain('kind "widgets" is not a kind of run');
    const pass = await rejection(c.client.retryRun({ runId, kind: "catch-up" }));
    expect(pass.code).toBe(Code.INVALID_ARGUMENT);
    const unknownIds = await rejection(c.client.retryRun({ runId, sourceIds: ["999999"] }));
    expect(unknownIds.code).toBe(Code.FAILED_PRECONDITION);
    expect(unknownIds.message).toContain("source ids 999999");
    const blank = await rejection(c.client.retryRun({ runId, sourceIds: [" "] }));
    expect(blank.code).toBe(Code.INVALID_ARGUMENT);
  });
});
