import { describeFailure, EXIT, type Io, runCommand } from "@drover/cli";
import { Code, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN,
  type Cluster,
  rejection,
  startCluster,
  until,
  untilFinished,
} from "../support/in-process.js";
import { PRODUCT_TABLES, productContent } from "../support/product-tables.js";

/**
 * RevertRun against the sandbox: a revert removes exactly what the run created, table by table,
 * while contacts the product already had (seeded like the demo does) stay as they were; another
 * run's records linking to the run's records stop it unless forced.
 */

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2 });
});

afterAll(async () => {
  await cluster?.close();
});

/** Each product table of the tenant as one checksum over all its rows and columns, in id order. */
async function productChecksums(tenantId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of PRODUCT_TABLES) {
    const [row] = await cluster.database.db.execute<{ n: string; sum: string | null }>(sql`
      select count(*)::text as n, md5(coalesce(string_agg(t::text, '|' order by t.id), '')) as sum
        from ${sql.raw(`app.${table}`)} t where t.tenant_id = ${tenantId}`);
    out[table] = `${row!.n}:${row!.sum}`;
  }
  return out;
}

/** As the demo does: every 25th sandbox person with an email is already a contact of the product. */
async function seedExistingContacts(tenantId: string): Promise<number> {
  const res = await fetch(`${cluster.sandbox.url}/v1/persons?start=0&limit=500`, {
    headers: { "x-api-token": API_TOKEN },
  });
  const body = (await res.json()) as { data: { name?: unknown; email?: { value?: unknown }[] }[] | null };
  const picks = (body.data ?? [])
    .filter((_, i) => i % 25 === 0)
    .map((p) => ({ name: String(p.name ?? "Existing contact"), email: p.email?.[0]?.value }))
    .filter(
      (p): p is { name: string; email: string } => typeof p.email === "string" && p.email.includes("@"),
    );
  for (const p of picks)
    await cluster.database.db.execute(
      sql`insert into app.contacts (tenant_id, name, email) values (${tenantId}, ${p.name}, ${p.email})`,
    );
  return picks.length;
}

/** Runs one `drover` command against the cluster's coordinator and captures what it prints. */
async function drover(...argv: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const io: Io = { out: (t) => lines.push(t), err: (t) => lines.push(t), isTty: false };
  const [command, ...rest] = argv;
  try {
    return { code: await runCommand(command!, rest, cluster.client, io, {}), out: lines.join("\n") };
  } catch (err) {
    const failure = describeFailure(err);
    return { code: failure.code, out: failure.message };
  }
}

async function ledgerCount(runId: string, action: string): Promise<number> {
  const [row] = await cluster.database.db.execute<{ n: string }>(
    sql`select count(*)::text as n from drover.ledger where run_id = ${runId}::uuid and action = ${action}`,
  );
  return Number(row!.n);
}

describe("RevertRun", () => {
  it("leaves every product table as it was before the run, the contacts it matched untouched", async () => {
    const tenantId = "revert-exact";
    const seeded = await seedExistingContacts(tenantId);
    expect(seeded).toBeGreaterThan(0);
    const seededContacts = await cluster.database.db.execute(
      sql`select * from app.contacts where tenant_id = ${tenantId} order by id`,
    );
    const before = await productChecksums(tenantId);

    const imported = await untilFinished(cluster, (await cluster.start(tenantId)).id);
    expect(imported.status).toBe(RunStatus.SUCCEEDED);
    expect(await ledgerCount(imported.id, "matched")).toBeGreaterThan(0);
    const created = await ledgerCount(imported.id, "created");
    expect(created).toBeGreaterThan(0);
    expect(await productChecksums(tenantId)).not.toEqual(before);

    const { run: started } = await cluster.client.revertRun({ runId: imported.id });
    expect(started!.revert?.reverts).toBe(imported.id);
    // Children before parents: the reverted run's phases backwards.
    expect(started!.phases.map((p) => p.kinds)).toEqual(imported.phases.map((p) => p.kinds).reverse());
    const revert = await untilFinished(cluster, started!.id, 60_000);
    expect(revert.status).toBe(RunStatus.SUCCEEDED);
    expect(revert.revert?.removed).toBe(BigInt(created));
    expect(revert.revert?.kept).toBe(0n);
    expect(revert.verification).toBeUndefined();

    expect(await productChecksums(tenantId)).toEqual(before);
    expect(
      await cluster.database.db.execute(
        sql`select * from app.contacts where tenant_id = ${tenantId} order by id`,
      ),
    ).toEqual(seededContacts);
    // The created slots are released; what the run matched stays accounted for.
    expect(await ledgerCount(imported.id, "created")).toBe(0);
    expect(await ledgerCount(imported.id, "matched")).toBeGreaterThan(0);

    const { run: reverted } = await cluster.client.getRun({ runId: imported.id });
    expect(reverted!.revert?.revertedBy).toBe(revert.id);

    // Re-driving part of a reverted run would bring those records back, without their parents.
    const redrive = await rejection(cluster.client.retryRun({ runId: imported.id, kind: "persons" }));
    expect(redrive.code).toBe(Code.FAILED_PRECONDITION);
    expect(redrive.message).toContain(`reverted by run ${revert.id}`);

    const again = await rejection(cluster.client.revertRun({ runId: imported.id }));
    expect(again.code).toBe(Code.FAILED_PRECONDITION);
    expect(again.message).toContain(revert.id);
    const ofRevert = await rejection(cluster.client.revertRun({ runId: revert.id }));
    expect(ofRevert.code).toBe(Code.FAILED_PRECONDITION);
    expect(ofRevert.message).toContain("cannot be reverted");
  }, 120_000);

  it("reverts a stopped run through a stop and a resume of the revert, and the reverted run cannot be resumed", async () => {
    const tenantId = "revert-stopped";
    const before = await productChecksums(tenantId);
    const importing = await cluster.start(tenantId);
    await until(
      async () => (await ledgerCount(importing.id, "created")) > 50,
      30_000,
      "the import to create records",
    );
    await cluster.client.stopRun({ runId: importing.id });
    const stopped = await untilFinished(cluster, importing.id);
    expect(stopped.status).toBe(RunStatus.STOPPED);
    const created = await ledgerCount(importing.id, "created");

    const { run: started } = await cluster.client.revertRun({ runId: importing.id });
    await cluster.client.stopRun({ runId: started!.id });
    expect((await untilFinished(cluster, started!.id)).status).toBe(RunStatus.STOPPED);
    // A reverted run's records are gone on purpose: resuming it would bring them back.
    const resume = await rejection(cluster.client.resumeRun({ runId: importing.id }));
    expect(resume.code).toBe(Code.FAILED_PRECONDITION);
    expect(resume.message).toContain(`reverted by run ${started!.id}`);

    await cluster.client.resumeRun({ runId: started!.id });
    const revert = await untilFinished(cluster, started!.id, 60_000);
    expect(revert.status).toBe(RunStatus.SUCCEEDED);
    expect(revert.revert?.removed).toBe(BigInt(created));
    expect(await productChecksums(tenantId)).toEqual(before);
    expect(await ledgerCount(importing.id, "created")).toBe(0);
  }, 120_000);

  it("refuses a run another run's records link to, naming them, and with force clears those links", async () => {
    const tenantId = "revert-linked";
    const orgs = await untilFinished(cluster, (await cluster.start(tenantId, ["organizations"])).id);
    expect(orgs.status).toBe(RunStatus.SUCCEEDED);
    const people = await untilFinished(cluster, (await cluster.start(tenantId, ["persons"])).id);
    expect(people.status).toBe(RunStatus.SUCCEEDED);
    const [linked] = await cluster.database.db.execute<{ n: string }>(sql`
      select count(*)::text as n from app.contacts c
        join drover.ledger l on l.record_type = 'contact' and l.record_id = c.id and l.run_id = ${people.id}::uuid
       where c.tenant_id = ${tenantId} and c.company_id is not null`);
    expect(Number(linked!.n)).toBeGreaterThan(0);

    const refused = await rejection(cluster.client.revertRun({ runId: orgs.id }));
    expect(refused.code).toBe(Code.FAILED_PRECONDITION);
    expect(refused.message).toContain(`run ${people.id}'s persons`);
    expect(refused.message).toContain("app.contacts.company_id");
    const cli = await drover("revert", orgs.id);
    expect(cli.code).toBe(EXIT.conflict);
    expect(cli.out).toContain("Revert with force");
    // Refused before anything was written: no revert run exists.
    const { run: untouched } = await cluster.client.getRun({ runId: orgs.id });
    expect(untouched!.revert).toBeUndefined();

    const forcedCli = await drover("revert", orgs.id, "--force", "--json");
    expect(forcedCli.code).toBe(0);
    const forced = (JSON.parse(forcedCli.out) as { run: { id: string; revert: { force: boolean } } }).run;
    expect(forced.revert.force).toBe(true);
    const done = await untilFinished(cluster, forced.id, 60_000);
    expect((await drover("status", done.id)).out).toContain(`revert of run ${orgs.id} (forced)`);
    expect((await drover("status", orgs.id)).out).toContain(`reverted by run ${done.id}`);
    expect(done.status).toBe(RunStatus.SUCCEEDED);
    const [left] = await cluster.database.db.execute<{
      companies: string;
      linked: string;
      contacts: string;
    }>(sql`
      select (select count(*) from app.companies where tenant_id = ${tenantId})::text as companies,
             (select count(*) from app.contacts where tenant_id = ${tenantId} and company_id is not null)::text as linked,
             (select count(*) from app.contacts where tenant_id = ${tenantId})::text as contacts`);
    expect(left).toEqual({ companies: "0", linked: "0", contacts: expect.any(String) });
    // The later run's own records stay, only their links are cleared, each noted.
    expect(Number(left!.contacts)).toBe(await ledgerCount(people.id, "created"));
    const { groups } = await cluster.client.listNotes({ runId: done.id });
    const cleared = groups.filter(
      (g) => g.kind === "persons" && g.reason.startsWith("forced: cleared app.contacts.company_id"),
    );
    expect(cleared.reduce((n, g) => n + Number(g.count), 0)).toBe(Number(linked!.n));
  }, 120_000);

  it("releases the run's matched rows on records it created, so a re-import after the revert equals the first import table by table", async () => {
    const tenantId = "revert-reimport";
    const first = await untilFinished(cluster, (await cluster.start(tenantId)).id);
    expect(first.status).toBe(RunStatus.SUCCEEDED);
    // Persons sharing an email: the later ones matched to the contact this run created for the first.
    const [shared] = await cluster.database.db.execute<{ n: string }>(sql`
      select count(*)::text as n from drover.ledger m
        join drover.ledger c on c.tenant_id = m.tenant_id and c.record_type = m.record_type
                            and c.record_id = m.record_id and c.action = 'created' and c.run_id = m.run_id
       where m.run_id = ${first.id}::uuid and m.action = 'matched'`);
    expect(Number(shared!.n)).toBeGreaterThan(0);
    const imported = await productContent(cluster.database.db, tenantId);

    const { run: started } = await cluster.client.revertRun({ runId: first.id });
    expect((await untilFinished(cluster, started!.id, 60_000)).status).toBe(RunStatus.SUCCEEDED);
    // Nothing of the run points at a record any more.
    const [left] = await cluster.database.db.execute<{ n: string }>(sql`
      select count(*)::text as n from drover.ledger where run_id = ${first.id}::uuid and record_id is not null`);
    expect(Number(left!.n)).toBe(0);

    const again = await untilFinished(cluster, (await cluster.start(tenantId)).id);
    expect(again.status).toBe(RunStatus.SUCCEEDED);
    const reimported = await productContent(cluster.database.db, tenantId);
    for (const table of PRODUCT_TABLES) {
      expect(reimported[table].length, table).toBe(imported[table].length);
      expect(reimported[table], table).toEqual(imported[table]);
    }
    const { groups } = await cluster.client.listNotes({ runId: again.id });
    expect(groups.filter((g) => g.level === "error")).toEqual([]);
  }, 180_000);
});
