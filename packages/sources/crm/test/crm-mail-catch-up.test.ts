import type { Sandbox } from "@drover/crm-sandbox";
import { seedContext, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { CATCH_UP } from "../src/lists.js";
import { crmProvider } from "../src/provider.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * The catch-up on an account whose per-deal mail list ignores include_body (bodies come one GET per
 * message): a deal whose message count grew since its mail was listed gets its mail listed again
 * (an edited deal whose count stayed does not), and only a message the ledger does not hold yet
 * has its body fetched; the messages already imported unchanged are not
 * downloaded again. Counted by the sandbox's own request stats.
 */
let sandbox: Sandbox;
const account = crmTestAccount("mail-catch-up");
const { token: TOKEN, secrets } = account;
const tenantId = "mail-catch-up";
const KINDS = ["deals", "mail"];

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 3,
    organizations: 0,
    persons: 0,
    deals: 12,
    leads: 0,
    activities: 0,
    notes: 0,
    mailPerDealMax: 4,
    heavyMailDealRate: 0,
    listIncludeBody: 0,
    changeEdits: 4,
  });
});

async function mailLedger(): Promise<
  Map<string, { recordId: string; body: string | null; dealSourceId: string }>
> {
  const rows = await account.db.execute<{
    source_id: string;
    record_id: string;
    body: string | null;
    deal: string;
  }>(sql`
    select l.source_id, l.record_id::text, e.body, d.source_id as deal
      from drover.ledger l join app.emails e on e.id = l.record_id
      join drover.ledger d on d.tenant_id = l.tenant_id and d.kind = 'deals' and d.record_id = e.deal_id
     where l.tenant_id = ${tenantId} and l.kind = 'mail'`);
  return new Map(
    rows.map((r) => [r.source_id, { recordId: r.record_id, body: r.body, dealSourceId: r.deal }]),
  );
}

async function sourceBody(id: string): Promise<string | null> {
  const res = await fetch(`${sandbox.url}/v1/mailbox/mailMessages/${id}?include_body=1`, {
    headers: { "x-api-token": TOKEN },
  });
  const body = ((await res.json()) as { data: { body?: string | null } }).data.body;
  return body === "" || body === undefined ? null : body;
}

/** The deals and mail phases of a new run of `tenant`, in process; the sandbox's stats cover the mail phase. */
async function importDealsAndMail(tenant: string, startedAt = new Date()) {
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId: tenant,
    sourceAccount: "mail-catch-up",
    kinds: KINDS,
    baseUrl: sandbox.url,
    token: TOKEN,
    startedAt,
  });
  const run = toRunInfo((await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!);
  const deals = await crmProvider.seedPhase(seedContext(undefined as never, run, 0, ["deals"]));
  await drainTasks(account.db, secrets, runId, deals);
  const mailSeeds = await account.db.transaction((tx) =>
    crmProvider.seedPhase(seedContext(tx, run, 1, ["mail"])),
  );
  sandbox.resetStats();
  const { summary } = await drainTasks(account.db, secrets, runId, mailSeeds, 1);
  return { run, runId, summary };
}

describe("the mail catch-up in fetch mode", () => {
  it("fetches the body of a message new to the ledger only, not of the messages of an edited deal already imported", async () => {
    const startedAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 2000);
    const { run, runId } = await importDealsAndMail(tenantId, startedAt);
    const imported = await mailLedger();
    const total = sandbox.truth(["mail"]).kinds.mail.count;
    expect(imported.size).toBe(total);
    // Fetch mode: the first pass fetched each body once, and only of messages that have one.
    const bodyless = sandbox.truth(["mail"]).kinds.mail.bodyless.length;
    expect(bodyless).toBeGreaterThan(0);
    expect(sandbox.stats().byCallType.get).toBe(total - bodyless);

    expect(sandbox.applyChanges()).toBe(true);
    const editedDeals = sandbox.truth(["deals"]).kinds.deals.edited;
    const ofEdited = [...imported].filter(([, m]) => editedDeals.includes(m.dealSourceId));
    expect(ofEdited.length).toBeGreaterThan(2);
    // One message of an edited deal is new to the ledger (as one that arrived after the mail phase).
    const [fresh] = ofEdited.find(([, m]) => m.body !== null)!;
    await account.db.execute(sql`delete from app.emails where id = ${imported.get(fresh)!.recordId}::bigint`);
    await account.db.execute(
      sql`delete from drover.ledger where tenant_id = ${tenantId} and kind = 'mail' and source_id = ${fresh}`,
    );
    // ... and its deal's mail was listed against a count one lower: its count grew since.
    const freshDeal = imported.get(fresh)!.dealSourceId;
    const ofFreshDeal = [...imported.values()].filter((m) => m.dealSourceId === freshDeal).length;
    await account.db.execute(sql`
      update drover.tasks t set cursor = jsonb_set(t.cursor, array['expected', (d.i - 1)::text], to_jsonb(${ofFreshDeal - 1}::int))
        from drover.tasks s cross join lateral jsonb_array_elements_text(s.cursor->'deals') with ordinality as d(deal, i)
       where t.id = s.id and s.run_id = ${runId}::uuid and s.kind = 'mail' and d.deal = ${freshDeal}`);

    sandbox.resetStats();
    const catchUp = await crmProvider.seedPhase(seedContext(undefined as never, run, 2, [CATCH_UP]));
    const { summary } = await drainTasks(account.db, secrets, runId, catchUp, 2);
    const stats = sandbox.stats();
    // Only the mail of the deal whose count grew was listed again (not that of every edited deal),
    // and exactly one body was fetched: the new message's.
    expect(stats.byCallType.get).toBe(1);
    expect(stats.byEndpoint["/v1/deals/{id}/mailMessages"]?.requests).toBe(1);
    // Deals applied again, the deal's messages already imported already here, the new one created.
    expect(summary).toMatchObject({
      created: 1,
      alreadyHere: editedDeals.length + ofFreshDeal - 1,
      failed: 0,
    });

    const after = await mailLedger();
    expect(after.size).toBe(total);
    expect(after.get(fresh)!.body).toBe(await sourceBody(fresh));
    for (const [id, m] of imported) if (id !== fresh) expect(after.get(id)).toEqual(m);
  });

  it("a re-run's mail phase fetches no body of a message already imported", async () => {
    const first = await importDealsAndMail("mail-rerun");
    const total = sandbox.truth(["mail"]).kinds.mail.count;
    expect(first.summary.created).toBe(total);
    await account.db.execute(
      sql`update drover.runs set status = 'succeeded' where id = ${first.runId}::uuid`,
    );
    const again = await importDealsAndMail("mail-rerun");
    expect(again.summary).toMatchObject({ created: 0, alreadyHere: total, failed: 0 });
    expect(sandbox.stats().byCallType.get ?? 0).toBe(0);
  });
});
