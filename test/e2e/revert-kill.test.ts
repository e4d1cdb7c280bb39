import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";

/**
 * A worker killed (SIGKILL) while it removes a run's records: its window rolls back, another
 * worker takes the task over from the last committed window, and the revert ends with nothing of
 * the run left and nothing removed twice. Real processes, real signals.
 */
const PRODUCT_TABLES = ["companies", "contacts", "deals", "leads", "activities", "notes", "emails"] as const;
let h: Harness;

beforeAll(async () => {
  h = await openClusterHarness({
    coordinators: 1,
    workers: 2,
    laneWidth: 2,
    sandbox: {
      organizations: 200,
      persons: 600,
      deals: 100,
      leads: 50,
      activities: 600,
      notes: 600,
      "mail-per-deal-max": 2,
    },
    env: {
      DROVER_REAPER_INTERVAL_MS: "500",
      DROVER_WORKER_LIVENESS_MS: "4000",
      // Small windows, so a revert task spans many and a kill lands between or inside them.
      DROVER_REVERT_WINDOW_SIZE: "20",
    },
  });
});

afterAll(async () => {
  await h?.close();
});

async function checksums(tenantId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of PRODUCT_TABLES) {
    const [row] = await h.database.db.execute<{ n: string; sum: string }>(sql`
      select count(*)::text as n, md5(coalesce(string_agg(t::text, '|' order by t.id), '')) as sum
        from ${sql.raw(`app.${table}`)} t where t.tenant_id = ${tenantId}`);
    out[table] = `${row!.n}:${row!.sum}`;
  }
  return out;
}

describe("a revert survives a killed worker", () => {
  it("SIGKILL a worker mid-revert: the revert finishes, nothing left, nothing removed twice", async () => {
    const tenantId = "revert-kill";
    // A contact the product already had, which the import matches and the revert must keep.
    const [person] = (
      (await await fetch(`${h.cluster.sandboxUrl}/v1/persons?start=0&limit=1`, {
        headers: { "x-api-token": "t" },
      }).then((r) => r.json())) as { data: { email?: { value?: string }[] }[] }
    ).data;
    await h.database.db.execute(sql`
      insert into app.contacts (tenant_id, name, email) values (${tenantId}, 'Known', ${person!.email![0]!.value!})`);
    const before = await checksums(tenantId);

    const { run: started } = await h.client.startRun({
      tenantId,
      source: "crm",
      sourceAccount: "sandbox",
      sourceConfig: {
        baseUrl: h.cluster.sandboxUrl,
        apiToken: "t",
        settings: { pageSize: "200", stripes: "2" },
      },
    });
    const imported = await watchToEnd(h.client, started!.id);
    expect(imported.status).toBe(RunStatus.SUCCEEDED);
    const [counts] = await h.database.db.execute<{ created: string; matched: string }>(sql`
      select count(*) filter (where action = 'created')::text as created,
             count(*) filter (where action = 'matched')::text as matched
        from drover.ledger where run_id = ${imported.id}::uuid`);
    expect(Number(counts!.matched)).toBeGreaterThan(0);

    const { run: revertStarted } = await h.client.revertRun({ runId: imported.id });
    const revertId = revertStarted!.id;
    // A revert task past its first window, held by a worker: kill that worker.
    const held = await until(
      "a revert task past its first window",
      async () => {
        const [t] = await h.database.db.execute<{ id: string; locked_by: string }>(sql`
          select id::text, locked_by from drover.tasks
           where run_id = ${revertId}::uuid and status = 'running'
             and (cursor ->> 'afterLedgerId')::bigint > 0 limit 1`);
        return t;
      },
      60_000,
    );
    const worker = h.cluster.workers.find((w) => w.name === held.locked_by.split("/")[0])!;
    worker.signal("SIGKILL");
    await worker.exited;
    await h.cluster.addWorker();

    const revert = await watchToEnd(h.client, revertId);
    expect(revert.status).toBe(RunStatus.SUCCEEDED);
    // Every created record removed exactly once: none left over, none found already gone (which a
    // window removed twice would show), none kept.
    expect(revert.revert?.removed).toBe(BigInt(counts!.created));
    expect(revert.revert?.kept).toBe(0n);
    const [gone] = await h.database.db.execute<{ n: string }>(sql`
      select coalesce(sum((stats ->> 'gone')::bigint), 0)::text as n from drover.tasks where run_id = ${revertId}::uuid`);
    expect(gone!.n).toBe("0");
    const [task] = await h.database.db.execute<{ attempts: number }>(
      sql`select attempts from drover.tasks where id = ${held.id}`,
    );
    expect(task!.attempts).toBeGreaterThanOrEqual(2);
    expect(await checksums(tenantId)).toEqual(before);
  }, 240_000);
});
