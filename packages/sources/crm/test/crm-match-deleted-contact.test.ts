import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { drainKinds } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * Found by the model test (follow, change, change): a person added at the source with the email of
 * a person the source had deleted was matched to that person's contact, which a follow pass had
 * marked deleted, so the product showed no live contact for a live source person. A contact the
 * source deleted is no one to match: the new person gets a contact of its own.
 */
const account = crmTestAccount("match-deleted");

describe("matching a person by email", { timeout: 60_000 }, () => {
  it("never matches a contact the source deleted, and still matches a live one", async () => {
    const s = await account.sandbox({
      seed: 89,
      organizations: 0,
      persons: 3,
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
      malformedRate: 0,
    });
    const tenantId = "match-deleted";
    const persons = (await (
      await fetch(`${s.url}/api/v2/persons?limit=10`, { headers: { "x-api-token": account.token } })
    ).json()) as { data: { id: number; emails: { value: string }[] }[] };
    // Two persons of different emails (persons 1 and 2 of this seed share one).
    const withEmail = persons.data.filter((p) => p.emails[0]?.value);
    const deletedOne = withEmail[0]!;
    const liveOne = withEmail.find((p) => p.emails[0]!.value !== deletedOne.emails[0]!.value)!;
    await account.db.execute(sql`
      insert into app.contacts (tenant_id, name, email, deleted_at)
      values (${tenantId}, 'Deleted at the source', ${deletedOne.emails[0]!.value}, now())`);
    const [live] = await account.db.execute<{ id: string }>(sql`
      insert into app.contacts (tenant_id, name, email)
      values (${tenantId}, 'The product''s own', ${liveOne.emails[0]!.value}) returning id::text as id`);
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId,
      sourceAccount: tenantId,
      kinds: ["persons"],
      baseUrl: s.url,
      token: account.token,
    });
    const tasks = await drainKinds(account.db, account.secrets, runId, [["persons"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
    const ledger = await account.db.execute<{
      source_id: string;
      action: string;
      deleted: boolean;
      record_id: string;
    }>(sql`
      select l.source_id, l.action, c.deleted_at is not null as deleted, l.record_id::text as record_id
        from drover.ledger l join app.contacts c on c.id = l.record_id
       where l.run_id = ${runId}::uuid and l.source_id in (${String(deletedOne.id)}, ${String(liveOne.id)})
       order by l.source_id = ${String(liveOne.id)}`);
    expect(ledger.map((l) => [l.action, l.deleted])).toEqual([
      ["created", false],
      ["matched", false],
    ]);
    expect(ledger[1]!.record_id).toBe(live!.id);
  });
});
