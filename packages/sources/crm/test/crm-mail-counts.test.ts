import type { Sandbox, SandboxOptions } from "@drover/crm-sandbox";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { grownSince, listedCounts, mailCountOf, mailDealsOf, noteShortList } from "../src/mail-counts.js";
import { drainKinds, runOneTask } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * Mail is listed only for deals that have messages, as the v2 deal list's
 * `include_fields=email_messages_count` says; an account that does not say it (ignores or refuses
 * the parameter) gets every deal's mail listed, with a note. Counted by the sandbox's own stats.
 */
const account = crmTestAccount("mail-counts");
const { token: TOKEN, secrets } = account;
const DEALS = 30;
const SIZES: SandboxOptions = {
  seed: 21,
  organizations: 0,
  persons: 0,
  deals: DEALS,
  leads: 0,
  activities: 0,
  notes: 0,
  mailPerDealMax: 2,
  heavyMailDealRate: 0,
  archivedRate: 0,
};

async function importDealsAndMail(sandbox: Sandbox, tenantId: string) {
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: tenantId,
    kinds: ["deals", "mail"],
    baseUrl: sandbox.url,
    token: TOKEN,
  });
  const tasks = await drainKinds(account.db, secrets, runId, [["deals"], ["mail"]]);
  expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
  const [mail] = await account.db.execute<{ n: number }>(sql`
    select count(*)::int as n from drover.ledger where tenant_id = ${tenantId} and kind = 'mail'`);
  const notes = await account.db.execute<{ level: string; subject_id: string | null; reason: string }>(sql`
    select level, subject_id, reason from drover.notes where run_id = ${runId}::uuid and kind = 'mail'`);
  const stats = sandbox.stats();
  return {
    imported: mail!.n,
    notes,
    mailLists: stats.byEndpoint["/v1/deals/{id}/mailMessages"]?.requests ?? 0,
    dealPages: stats.byEndpoint["/api/v2/deals"]?.requests ?? 0,
  };
}

/** Deals of the sandbox's account whose mail list holds messages, as its deal list says. */
async function dealsWithMail(sandbox: Sandbox): Promise<number> {
  const res = await fetch(
    `${sandbox.url}/api/v2/deals?limit=500&status=open,won,lost,deleted&include_fields=email_messages_count`,
    {
      headers: { "x-api-token": TOKEN },
    },
  );
  const body = (await res.json()) as { data: { email_messages_count: number }[] };
  return body.data.filter((d) => d.email_messages_count > 0).length;
}

describe("mail listed per deal", () => {
  it("is asked only of deals whose email_messages_count is above 0, and every message is imported", async () => {
    const sandbox = await account.sandbox(SIZES);
    const withMail = await dealsWithMail(sandbox);
    sandbox.resetStats();
    const run = await importDealsAndMail(sandbox, "counts-answered");
    expect(withMail).toBeLessThan(DEALS);
    expect(run.mailLists).toBe(withMail);
    expect(run.imported).toBe(sandbox.truth(["mail"]).kinds.mail.count);
    expect(run.notes).toEqual([]);
  });

  it("lists no mail at all on an account whose deals have none", async () => {
    const sandbox = await account.sandbox({ ...SIZES, mailPerDealMax: 0, heavyMailDealRate: 0 });
    const run = await importDealsAndMail(sandbox, "counts-none");
    expect(run.mailLists).toBe(0);
    expect(run.imported).toBe(0);
  });

  it("falls back to every deal, with one note, on an account whose deal list does not answer the count", async () => {
    const sandbox = await account.sandbox({ ...SIZES, dealMailCounts: 0 });
    const run = await importDealsAndMail(sandbox, "counts-ignored");
    expect(run.mailLists).toBe(DEALS);
    expect(run.imported).toBe(sandbox.truth(["mail"]).kinds.mail.count);
    expect(run.notes).toHaveLength(1);
    expect(run.notes[0]).toMatchObject({ level: "info", subject_id: null });
    expect(run.notes[0]!.reason).toMatch(/does not say how many messages a deal has.*every deal/);
  });

  it("reads the page again without include_fields on an account that refuses it, and lists every deal's mail", async () => {
    const sandbox = await account.sandbox({ ...SIZES, dealMailCounts: 2 });
    const run = await importDealsAndMail(sandbox, "counts-refused");
    expect(run.mailLists).toBe(DEALS);
    // The refused page, then the same page without the parameter.
    expect(run.dealPages).toBe(2);
    expect(run.imported).toBe(sandbox.truth(["mail"]).kinds.mail.count);
    expect(run.notes.map((n) => n.reason)).toEqual([expect.stringMatching(/refused include_fields/)]);
  });

  it("is not asked for again by a task of a run that already found the account refusing it", async () => {
    const sandbox = await account.sandbox({ ...SIZES, dealMailCounts: 2 });
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId: "counts-refused-before",
      sourceAccount: "counts-refused-before",
      kinds: ["deals", "mail"],
      baseUrl: sandbox.url,
      token: TOKEN,
    });
    await account.db.execute(sql`
      insert into drover.run_facts (run_id, key, value) values (${runId}::uuid, 'crm.deals.mail_counts_refused', 'true'::jsonb)`);
    sandbox.resetStats();
    const task = await runOneTask(account.db, secrets, runId, {
      kind: "deals",
      seedKey: "deals:0:page:0",
      cursor: { list: 0, page: 0, limit: 500, cursor: null },
    });
    expect(task.status).toBe("succeeded");
    // One page, asked without include_fields: no refused request first.
    expect(sandbox.stats().byEndpoint["/api/v2/deals"]).toEqual({ requests: 1, tokens: 10 });
  });
});

describe("a deal's message count", () => {
  const noted: { subjectId: string | null; reason: string }[] = [];
  const ctx = { noteOnce: async (n: { subjectId: string | null; reason: string }) => void noted.push(n) };

  it("is read only as a non-negative integer: missing, negative or not a number lists the deal's mail, noted deal by deal", async () => {
    expect(mailCountOf({ id: 1, email_messages_count: 3 })).toBe(3);
    expect(mailCountOf({ id: 1 })).toBe("missing");
    expect(mailCountOf({ id: 1, email_messages_count: -1 })).toBe("invalid");
    expect(mailCountOf({ id: 1, email_messages_count: "2" })).toBe("invalid");
    expect(mailCountOf({ id: 1, email_messages_count: 1.5 })).toBe("invalid");
    noted.length = 0;
    const page = [
      { id: 1, email_messages_count: 0 },
      { id: 2, email_messages_count: 4 },
      { id: 3 },
      { id: 4, email_messages_count: -2 },
      { id: 5, email_messages_count: "many" },
    ];
    expect(await mailDealsOf(ctx, page, true)).toEqual({
      deals: ["2", "3", "4", "5"],
      expected: [4, null, null, null],
    });
    expect(noted.map((n) => n.subjectId)).toEqual(["3", "4", "5"]);
    expect(noted[0]!.reason).toMatch(/is missing: assumed it may have mail/);
    expect(noted[1]!.reason).toMatch(/is -2, not a count/);
  });

  it("that a list does not reach is noted, and what the list held is what is imported", async () => {
    noted.length = 0;
    await noteShortList(ctx, "7", 2, 5);
    await noteShortList(ctx, "8", 3, 3);
    await noteShortList(ctx, "9", 0, null);
    expect(noted).toEqual([
      expect.objectContaining({
        subjectId: "7",
        reason: expect.stringMatching(/held 2 message\(s\) where its email_messages_count said 5/),
      }),
    ]);
  });
});

describe("a catch-up's deals with mail", () => {
  it("are those whose count grew since their mail was listed, or is unknown then or now; a deal never listed had 0", async () => {
    const listed = await listedCounts({
      keptCursors: async () => [
        { deals: ["1", "2", "3"], index: 0, expected: [2, 5, null] },
        // A later pass listed deal 2 again at 6.
        { deals: ["2"], index: 0, expected: [6] },
      ],
    });
    const found = { deals: ["1", "2", "3", "4", "5"], expected: [2, 7, 1, 3, null] };
    expect(grownSince(found, listed)).toEqual({ deals: ["2", "3", "4", "5"], expected: [7, 1, 3, null] });
    expect(grownSince({ deals: ["1", "2"], expected: [2, 6] }, listed)).toEqual({ deals: [], expected: [] });
    // An engine that cannot say lists every deal with mail, as before.
    expect(grownSince(found, await listedCounts({}))).toEqual(found);
  });
});
