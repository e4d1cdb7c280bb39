import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toRunInfo } from "../src/index.js";
import { dryRunMatches, seedCapabilities, verifyCapabilities } from "../src/source-capabilities.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

/**
 * What a source may ask of the run's own records (provider-sdk capabilities.ts), now that it holds
 * no handle on drover.*: each answer is scoped to the run, or to its tenant, source and source
 * account for the ledger, so a source can never read another tenant's or account's rows through it.
 */
let h: Harness;
beforeAll(async () => {
  h = await openHarness(4);
});
afterAll(async () => {
  await h?.close();
});

async function slot(
  run: { tenantId: string; source: string; sourceAccount: string; id: string },
  kind: string,
  sourceId: string,
  action: "created" | "matched" | "skipped",
  recordId: number | null,
) {
  await h.db.execute(sql`
    insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
    values (${run.tenantId}, ${run.source}, ${run.sourceAccount}, ${kind}, ${sourceId}, ${action},
            ${recordId === null ? null : "deal"}, ${recordId}, ${run.id}::uuid)`);
}

describe("the ledger as a source sees it", () => {
  it("holds only the run's tenant, source and account's created or matched rows", async () => {
    const run = await insertRun(h.db, { source: "s", sourceAccount: "a" });
    const sameTenantOtherAccount = await insertRun(h.db, {
      tenantId: run.tenantId,
      source: "s",
      sourceAccount: "b",
    });
    const otherTenant = await insertRun(h.db, { source: "s", sourceAccount: "a" });
    await slot(run, "deals", "1", "created", 101);
    await slot(run, "deals", "2", "matched", 102);
    await slot(run, "deals", "3", "skipped", null);
    await slot(sameTenantOtherAccount, "deals", "4", "created", 104);
    await slot(otherTenant, "deals", "5", "created", 105);
    const { ledger } = await h.db.transaction(async (tx) => seedCapabilities(tx, toRunInfo(run)));
    expect((await ledger.heldSourceIds("deals")).sort()).toEqual(["1", "2"]);
    expect(await ledger.heldCount("deals")).toBe(2);
    const ids = await ledger.recordIds({ deals: ["1", "2", "3", "4", "5"] });
    expect(["1", "2", "3", "4", "5"].map((id) => ids.get("deals", id))).toEqual([
      101,
      102,
      undefined,
      undefined,
      undefined,
    ]);
    expect(await ledger.sourceIdsOfRecords("deals", ["101", "104", "105"])).toEqual(new Map([["101", "1"]]));
    expect(await ledger.runRows("deals", 10)).toEqual({ rows: 3, created: 1, createdRecordIds: [101] });
  });

  it("counts a dry run's would-be rows as held, for that dry run only, and finds them by match key", async () => {
    const dry = await insertRun(h.db, { source: "s", sourceAccount: "dry", dryRun: true });
    const real = await insertRun(h.db, { tenantId: dry.tenantId, source: "s", sourceAccount: "dry" });
    await h.db.execute(sql`
      insert into drover.dry_run_rows (run_id, kind, source_id, match_key)
      values (${dry.id}::uuid, 'persons', '7', 'a@x.io')`);
    const capabilities = (runRow: typeof dry) => verifyCapabilities(h.db, toRunInfo(runRow));
    expect(await capabilities(dry).ledger.heldSourceIds("persons")).toEqual(["7"]);
    expect(await capabilities(real).ledger.heldSourceIds("persons")).toEqual([]);
    const found = await h.db.transaction((tx) =>
      dryRunMatches(dry.id).matchKeys(tx, "persons", ["a@x.io", "b@x.io"]),
    );
    expect(found).toEqual(new Set(["a@x.io"]));
  });
});

describe("the run's own records, as seeding and verification see them", () => {
  it("lists the run's failed rows, says a note once, and counts what the run's tasks listed", async () => {
    const run = await insertRun(h.db);
    const other = await insertRun(h.db);
    const note = (runId: string, level: string, subject: string | null) =>
      h.db.execute(sql`insert into drover.notes (run_id, level, kind, subject_id, reason)
                       values (${runId}::uuid, ${level}, 'deals', ${subject}, 'r')`);
    await note(run.id, "error", "8");
    await note(run.id, "warn", "9");
    await note(run.id, "error", null);
    await note(other.id, "error", "10");
    await h.db.transaction(async (tx) => {
      const seed = seedCapabilities(tx, toRunInfo(run));
      expect(await seed.failedSourceIds("deals")).toEqual(["8"]);
      const said = { level: "warn" as const, kind: "mail", subjectId: null, reason: "no deal" };
      await seed.noteOnce(said);
      await seed.noteOnce(said);
    });
    const [notes] = await h.db.execute<{ n: number }>(sql`
      select count(*)::int as n from drover.notes where run_id = ${run.id}::uuid and kind = 'mail'`);
    expect(notes?.n).toBe(1);

    await insertTask(h.db, run.id, { kind: "leads", cursor: { list: 0 }, listedIds: ["1", "2"] });
    await insertTask(h.db, run.id, { kind: "leads", cursor: { list: 0, page: 1 }, listedIds: ["2", "3"] });
    await insertTask(h.db, run.id, { kind: "leads", cursor: { list: 1 }, listedIds: ["4"] });
    await insertTask(h.db, other.id, { kind: "leads", cursor: { list: 0 }, listedIds: ["5"] });
    const verify = verifyCapabilities(h.db, toRunInfo(run));
    expect(await verify.listedCount("leads", { list: 0 })).toBe(3);
    expect(await verify.listedCount("leads", { list: 1 })).toBe(1);
  });
});
