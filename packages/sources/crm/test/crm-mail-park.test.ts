import { runAssignment } from "@drover/engine";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { crmProviders as providers } from "./crm-providers.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * A mail task parked by the source's rate limit keeps what it fetched: the lists and bodies it had
 * not written yet go into its cursor, so the next attempt asks the source only for the rest. The
 * sandbox counts what it admitted; every list and body must have been admitted exactly once.
 */
const account = crmTestAccount("mail-park");
const DEALS = 12;

describe("a parked mail task", { timeout: 120_000 }, () => {
  it("resumes without asking the source again for a list or body it had fetched before the park", async () => {
    const db = account.db;
    // Bodies fetched one by one (the list carries none), and a "day" of a second whose budget is
    // five lists or fifty bodies: the task parks again and again, mid-listing and mid-bodies.
    const sandbox = await account.sandbox({
      seed: 7,
      organizations: 0,
      persons: 0,
      deals: DEALS,
      leads: 0,
      activities: 0,
      notes: 0,
      mailPerDealMax: 6,
      listIncludeBody: 0,
      malformedRate: 0,
      transientErrorRate: 0,
      dailyBudget: 100,
      dailyResetSeconds: 1,
    });
    const runId = await insertCrmRun(db, account.secrets, {
      tenantId: "mail-park",
      sourceAccount: "mail-park",
      kinds: ["mail"],
      baseUrl: sandbox.url,
      token: account.token,
      // The run knows the sandbox's day, as a run against it must: a refusal read just after the
      // second it names (its reset then already past, which the client does not believe) falls back
      // on the day's rule, and with Pipedrive's day that is the next midnight, hours away (CI timed
      // out on it once, under load).
      settings: { bodyConcurrency: "4", dailyReset: "UTC", daySeconds: "1" },
    });
    const deals = Array.from({ length: DEALS }, (_, i) => String(i + 1));
    for (const deal of deals) {
      const [row] = await db.execute<{ id: string }>(
        sql`insert into app.deals (tenant_id, title) values ('mail-park', ${`deal ${deal}`}) returning id`,
      );
      await db.execute(sql`
        insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
        values ('mail-park', 'crm', 'mail-park', 'deals', ${deal}, 'created', 'deal', ${row!.id}, ${runId}::uuid)`);
    }
    const [task] = await db.execute<{ id: string }>(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, 'mail', 0, 'mail:park', ${JSON.stringify({ deals, index: 0 })}::jsonb)
      returning id`);
    sandbox.resetStats();

    const outcomes: string[] = [];
    for (let attempt = 0; attempt < 200; attempt++) {
      const outcome = await runAssignment(
        { db, providers, workerId: "park", maxAttempts: 3, notesCap: 1000, secrets: account.secrets },
        Number(task!.id),
        { shutdown: new AbortController().signal, working: () => {} },
      );
      outcomes.push(outcome.status);
      if (outcome.status === "succeeded" || outcome.status === "failed") break;
      const [due] = await db.execute<{ wait_ms: number }>(sql`
        select greatest(0, extract(epoch from available_at - now()) * 1000)::int as wait_ms
          from drover.tasks where id = ${task!.id}`);
      await new Promise((r) => setTimeout(r, (due?.wait_ms ?? 0) + 20));
    }
    expect(outcomes.at(-1)).toBe("succeeded");
    expect(outcomes.filter((o) => o === "parked").length).toBeGreaterThan(1);

    const messages = sandbox.truth().kinds.mail.count;
    const [written] = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where tenant_id = 'mail-park' and kind = 'mail'`,
    );
    expect(written!.n).toBe(messages);
    // One list per deal and one body per message that has one, each admitted once: nothing fetched twice.
    const stats = sandbox.stats();
    const admitted = stats.requests - (stats.byStatus["429"] ?? 0) - (stats.byStatus["403"] ?? 0);
    const bodyless = sandbox.truth().kinds.mail.bodyless.length;
    expect({ admitted, refused: stats.byStatus["429"] ?? 0 }).toEqual({
      admitted: DEALS + messages - bodyless,
      refused: expect.any(Number),
    });
    // What it kept is gone from the cursor once written.
    const [done] = await db.execute<{ cursor: Record<string, unknown> }>(
      sql`select cursor from drover.tasks where id = ${task!.id}`,
    );
    expect(done!.cursor.fetched).toBeUndefined();
  });
});
