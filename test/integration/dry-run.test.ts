import { Code, type DryRunKind, type Run, RunStatus } from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN,
  type Cluster,
  rejection,
  SETTINGS,
  startCluster,
  untilFinished,
} from "../support/in-process.js";

/** Every product table and the ledger, as rows: what a dry run must leave exactly as it was. */
const WATCHED = [
  "app.companies",
  "app.contacts",
  "app.deals",
  "app.leads",
  "app.activities",
  "app.notes",
  "app.emails",
  "drover.ledger",
];
const TENANT = "dry";

let c: Cluster;
beforeAll(async () => {
  // Malformed rows fail, activities and notes without a known parent are skipped, and persons share
  // emails: every outcome a dry run must predict happens on this account.
  c = await startCluster({ workers: 2, laneWidth: 2, sandbox: { malformedRate: 0.03 } });
});
afterAll(async () => {
  await c?.close();
});

/** Row count and an md5 over every row of each watched table. */
async function checksums(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of WATCHED) {
    const [row] = await c.database.sql<{ n: number; sum: string | null }[]>`
      select count(*)::int as n, md5(string_agg(t::text, '|' order by t::text)) as sum
        from ${c.database.sql(table)} t`;
    out[table] = `${row!.n}:${row!.sum ?? ""}`;
  }
  return out;
}

async function startDry(tenantId: string, account = "acct"): Promise<Run> {
  const { run } = await c.client.startRun({
    tenantId,
    source: "crm",
    sourceAccount: account,
    kinds: [],
    // The account's daily allowance as a customer states it (30,000 x plan multiplier x seats):
    // the report counts the real run's budget-days at it.
    sourceConfig: {
      baseUrl: c.sandbox.url,
      apiToken: API_TOKEN,
      settings: { ...SETTINGS, dailyTokens: "1000" },
    },
    dryRun: true,
  });
  return run!;
}

function byKind(kinds: readonly DryRunKind[]): Map<string, DryRunKind> {
  return new Map(kinds.map((k) => [k.kind, k]));
}

describe("a dry run", { timeout: 120_000 }, () => {
  let dry: Run;

  it("walks the whole source and leaves the product tables and the ledger exactly as they were", async () => {
    // The product is not empty: what is there must stay exactly as it is.
    await c.database.sql`
      insert into app.contacts (tenant_id, name, email) values (${TENANT}, 'Known already', 'someone@example.test')`;
    const before = await checksums();
    const started = await startDry(TENANT);
    expect(started.dryRun).toBe(true);
    dry = await untilFinished(c, started.id, 90_000);
    expect(dry.error).toBe("");
    expect(dry.status).toBe(RunStatus.SUCCEEDED);
    expect(await checksums()).toEqual(before);
    // It did walk: it knows what it would have written.
    const [wouldBe] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from drover.dry_run_rows where run_id = ${dry.id}::uuid`;
    expect(wouldBe!.n).toBeGreaterThan(0);
  });

  it("is not verified: there is nothing of its own to verify, and VerifyRun says so", async () => {
    await new Promise((r) => setTimeout(r, 1_500));
    const [req] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from drover.verification_requests where run_id = ${dry.id}::uuid`;
    expect(req!.n).toBe(0);
    const refused = await rejection(c.client.verifyRun({ runId: dry.id }));
    expect(refused.code).toBe(Code.FAILED_PRECONDITION);
    expect(refused.message).toContain("dry run");
  });

  it("reports per kind what the real run then does: would create = imported, would match, skip and fail alike", async () => {
    const report = dry.dryRunReport!;
    expect(report).toBeDefined();
    const predicted = byKind(report.kinds);
    // Persons whose email an earlier person has are matched, not created: the dry run sees them
    // across its rolled-back windows.
    expect(predicted.get("persons")!.matchedBy.email ?? 0n).toBeGreaterThan(0n);
    // Parents the real run would have written earlier count as present: the crm's children link.
    expect(predicted.get("activities")!.wouldCreate).toBeGreaterThan(0n);
    expect(predicted.get("mail")!.wouldCreate).toBeGreaterThan(0n);

    const real = await untilFinished(c, (await c.start(TENANT)).id, 90_000);
    expect(real.status).toBe(RunStatus.SUCCEEDED);
    for (const p of real.progress) {
      const d = predicted.get(p.kind)!;
      expect({ kind: p.kind, created: d.wouldCreate, skipped: d.wouldSkip, failed: d.wouldFail }).toEqual({
        kind: p.kind,
        created: p.imported,
        skipped: p.skipped,
        failed: p.failed,
      });
      expect({ kind: p.kind, matched: d.wouldMatch }).toEqual({
        kind: p.kind,
        matched: p.matched + p.alreadyHere,
      });
    }
    // The failures are grouped as the real run's notes group them, with sample ids.
    const failing = report.kinds.filter((k) => k.wouldFail > 0n);
    expect(failing.length).toBeGreaterThan(0);
    for (const k of failing) {
      const errors = k.reasons.filter((r) => r.level === "error");
      expect(errors.reduce((n, r) => n + r.count, 0n)).toBe(k.wouldFail);
      expect(errors[0]!.sampleSubjectIds.length).toBeGreaterThan(0);
    }
    // Skips are explained: the reason group, and which parents the skipped rows miss.
    const skipping = report.kinds.filter((k) => k.wouldSkip > 0n);
    expect(skipping.length).toBeGreaterThan(0);
    for (const k of skipping) {
      expect(k.reasons.some((r) => r.level === "warn" && r.reason === "not linked to any record")).toBe(true);
      const missing = Object.values(k.missingParents).reduce((n, c) => n + c, 0n);
      expect(missing).toBeGreaterThanOrEqual(k.wouldSkip);
    }
  });

  it("reports the source calls it made as the real run's cost, with a duration at the account's budget", () => {
    const report = dry.dryRunReport!;
    expect(report.requests).toBe(report.kinds.reduce((n, k) => n + k.requests, 0n));
    expect(report.requests).toBeGreaterThan(0n);
    expect(report.tokens).toBeGreaterThanOrEqual(report.requests);
    for (const k of report.kinds) if (k.kind !== "catch-up") expect(k.requests).toBeGreaterThan(0n);
    expect(report.durationText).toMatch(/^(about|under a minute)/);
    expect(report.dailyTokens).toBe(1000n);
    expect(report.budgetDays).toBeCloseTo(Number(report.tokens) / 1000, 6);
  });

  it("holds no admission slot: a real run starts beside it, and a second real run still does not", async () => {
    const tenant = "dry-beside";
    const dryRun = await startDry(tenant);
    const real = await c.start(tenant);
    expect(real.status).not.toBe(RunStatus.FAILED);
    const second = await rejection(c.start(tenant));
    expect(second.code).toBe(Code.ALREADY_EXISTS);
    expect(second.details?.run_id ?? "").toBe(real.id);
    await untilFinished(c, dryRun.id, 90_000);
    await untilFinished(c, real.id, 90_000);
  });
});
