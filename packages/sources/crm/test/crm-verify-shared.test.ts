import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { drainKinds, verifyCrmRun } from "./crm-drain.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * A record several source rows share is judged by the rule the writer applied to it: in the
 * sandbox of seed 8, person 38 shares person 2's email; person 2 has no phone, person 38 has one.
 * One stripe walks them in id order: the contact is created for person 2 and person 38 matched to
 * it. Read again (as a catch-up or follow pass does), person 38 fills the contact's empty phone
 * (fill-what-is-empty, crm/ownership.ts). That contact is right, and verification must say so; a
 * contact no other row shares still must hold exactly what its source row says.
 */
const account = crmTestAccount("verify-shared");

describe("verifying a record several source rows share", { timeout: 120_000 }, () => {
  it("accepts a field a sharing row filled where the creating row has none, and still flags one no row explains", async () => {
    const s = await account.sandbox({
      seed: 8,
      organizations: 10,
      persons: 120,
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
      malformedRate: 0,
    });
    const tenantId = "verify-shared";
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId,
      sourceAccount: "verify-shared",
      kinds: ["persons"],
      baseUrl: s.url,
      token: account.token,
      settings: { pageSize: "200", stripes: "1" },
    });
    const tasks = await drainKinds(account.db, account.secrets, runId, [["persons"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
    // A catch-up from a time after person 2's last change (2019) and before person 38's (2020): the
    // pass applies person 38 again to its held (matched) slot, which fills what the contact lacks.
    const since = "2020-01-01T00:00:00.000Z";
    const cursor = { list: 0, page: 0, limit: 200, cursor: null, stripes: 1, since, chain: [] };
    await drainTasks(account.db, account.secrets, runId, [
      { kind: "persons", seedKey: "catch-up:persons:0:page:0", cursor },
    ]);
    const [shared] = await account.db.execute<{ action: string; id: string; phone: string | null }>(sql`
      select m.action, c.id::text as id, c.phone from drover.ledger f
        join drover.ledger m on m.tenant_id = f.tenant_id and m.record_type = f.record_type and m.record_id = f.record_id
        join app.contacts c on c.id = f.record_id
       where f.run_id = ${runId}::uuid and f.kind = 'persons' and f.source_id = '2' and f.action = 'created'
         and m.source_id = '38'`);
    expect(shared).toEqual({
      action: "matched",
      id: expect.any(String),
      phone: expect.stringMatching(/^\+44 /),
    });

    const clean = await verifyCrmRun(account.db, runId, account.token, 500);
    expect(clean.kinds.flatMap((k) => k.mismatches)).toEqual([]);
    expect(clean.ok).toBe(true);

    // A created contact nobody shares, given a phone its source row does not have: still a mismatch.
    const [lone] = await account.db.execute<{ source_id: string; id: string }>(sql`
      select l.source_id, c.id::text as id from drover.ledger l join app.contacts c on c.id = l.record_id
       where l.run_id = ${runId}::uuid and l.action = 'created' and c.phone is null
         and not exists (select 1 from drover.ledger m where m.record_id = l.record_id and m.action = 'matched')
       limit 1`);
    await account.db.execute(
      sql`update app.contacts set phone = '+1 555 0000000' where id = ${lone!.id}::bigint`,
    );
    const after = await verifyCrmRun(account.db, runId, account.token, 500);
    expect(after.kinds.flatMap((k) => k.mismatches)).toEqual([
      expect.stringContaining(
        `${lone!.source_id}: phone is empty in the source but "+1 555 0000000" in contact ${lone!.id}`,
      ),
    ]);
  });
});
