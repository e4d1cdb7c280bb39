import { randomBytes } from "node:crypto";
import { kindDone, statusName } from "@drover/cli";
import { openDatabase } from "@drover/db";
import { accountFor, accountingProblems, startCluster } from "@drover/local-cluster";
import { createClient, type Run, RunService, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { parseDemoFlags, USAGE } from "./flags.js";
import { prepareDemoServices } from "./prepare.js";
import { followRun, ProgressView } from "./progress.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/drover_demo";
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const SOURCE_ACCOUNT = "sandbox-company";
const API_TOKEN = "demo-api-token";

async function main(): Promise<number> {
  let flags: ReturnType<typeof parseDemoFlags>;
  try {
    flags = parseDemoFlags(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }

  if (!(await prepareDemoServices(DATABASE_URL, NATS_URL))) return 1;

  const queuePrefix = `demo-${randomBytes(3).toString("hex")}`;
  process.stdout.write(
    `Starting the CRM sandbox, 1 coordinator and ${flags.workers} workers (logs in .artifacts/logs/${queuePrefix}/)\n`,
  );
  const cluster = await startCluster({
    databaseUrl: DATABASE_URL,
    natsUrl: NATS_URL,
    queuePrefix,
    workers: flags.workers,
    laneWidth: flags.lane,
    sandbox: flags.sandbox,
    env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    dashboard: true,
  });
  // The cluster's admin key lives as long as the demo: the page needs one to call the coordinator.
  process.stdout.write(
    `Run page: ${cluster.dashboardUrl} (enter this API key there: ${cluster.adminToken})\n`,
  );
  const database = openDatabase(DATABASE_URL, { max: 2 });
  const client = createClient(RunService, cluster.coordinatorAddresses[0]!, {
    metadata: () => ({ authorization: `Bearer ${cluster.adminToken}` }),
  });
  const onSignal = () => {
    process.stdout.write("\ninterrupted: stopping the services\n");
    void cluster.stop().then(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  try {
    const truth = (await (await fetch(`${cluster.sandboxUrl}/__sandbox/truth`)).json()) as {
      kinds: Record<string, { ids: string[]; malformed: string[] }>;
    };
    const totals = Object.fromEntries(Object.entries(truth.kinds).map(([k, t]) => [k, t.ids.length]));
    const sourceRows = Object.values(totals).reduce((a, b) => a + b, 0);
    const existing = await seedExistingContacts(database.db, flags.tenant, cluster.sandboxUrl);
    if (existing > 0)
      process.stdout.write(
        `The product already had ${existing} contacts for tenant "${flags.tenant}" (they will be matched by email)\n`,
      );

    const started = Date.now();
    const { run } = await client.startRun({
      tenantId: flags.tenant,
      source: "crm",
      sourceAccount: SOURCE_ACCOUNT,
      sourceConfig: { baseUrl: cluster.sandboxUrl, apiToken: API_TOKEN },
    });
    process.stdout.write(
      `StartRun: run ${run!.id} for tenant "${flags.tenant}", ${sourceRows} source rows\n`,
    );

    const last = await followRun(client, run!, new ProgressView(totals), started);

    const notes = await client.listNotes({ runId: last.id, samples: 3 });
    if (notes.groups.length > 0) {
      process.stdout.write("Reasons:\n");
      for (const g of notes.groups.slice(0, 8)) {
        process.stdout.write(
          `  ${String(g.count).padStart(6)} × ${g.level} ${g.kind}: ${g.reason} (e.g. ${g.sampleSubjectIds.join(", ")})\n`,
        );
      }
      process.stdout.write("\n");
    }

    const accounts = await accountFor(
      database.db,
      { tenantId: flags.tenant, source: "crm", sourceAccount: SOURCE_ACCOUNT, since: new Date(started) },
      truth.kinds,
    );
    const issues = [...accountingProblems(accounts), ...tableProblems(last, totals)];
    if (flags.keep) {
      // Ctrl-C now ends the wait, and the services stop as after any run.
      process.off("SIGINT", onSignal);
      process.stdout.write(
        `Services stay up for the run page at ${cluster.dashboardUrl}; Ctrl-C ends them.\n`,
      );
      await new Promise<void>((resolve) => process.once("SIGINT", () => resolve()));
    }
    if (issues.length === 0 && last.status === RunStatus.SUCCEEDED) {
      process.stdout.write(
        `Every one of the ${sourceRows} source rows is accounted for: in the ledger, or failed with a reason.\n`,
      );
      return 0;
    }
    process.stdout.write(
      `NOT every source row is accounted for:\n  - ${issues.join("\n  - ") || `the run ended ${statusName(last.status)}`}\n`,
    );
    return 1;
  } finally {
    process.off("SIGINT", onSignal);
    client.close();
    await database.close();
    await cluster.stop();
  }
}

/**
 * A product that already knows some of the customer's contacts: on the tenant's first run, every
 * 25th sandbox person with an email exists already, so the run shows "matched" rather than creating twins.
 */
async function seedExistingContacts(
  db: ReturnType<typeof openDatabase>["db"],
  tenantId: string,
  sandboxUrl: string,
): Promise<number> {
  const [known] = await db.execute<{ n: string }>(
    sql`select count(*) as n from app.contacts where tenant_id = ${tenantId}`,
  );
  if (Number(known?.n ?? 0) > 0) return 0;
  const res = await fetch(`${sandboxUrl}/v1/persons?start=0&limit=500`, {
    headers: { "x-api-token": API_TOKEN },
  });
  const body = (await res.json()) as { data: { name?: unknown; email?: { value?: unknown }[] }[] | null };
  const picks = (body.data ?? [])
    .filter((_, i) => i % 25 === 0)
    .map((p) => ({
      name: typeof p.name === "string" ? p.name : "Existing contact",
      email: p.email?.[0]?.value,
    }))
    .filter(
      (p): p is { name: string; email: string } => typeof p.email === "string" && p.email.includes("@"),
    );
  for (const p of picks) {
    await db.execute(
      sql`insert into app.contacts (tenant_id, name, email) values (${tenantId}, ${p.name}, ${p.email})`,
    );
  }
  return picks.length;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`demo failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);

/** The final table shows each source row once, in its final outcome: per kind, as many as the source has. */
function tableProblems(run: Run, totals: Readonly<Record<string, number>>): string[] {
  return run.progress
    .filter((p) => totals[p.kind] !== undefined && kindDone(p) !== totals[p.kind])
    .map((p) => `the table shows ${kindDone(p)} ${p.kind} rows for ${totals[p.kind]} in the source`);
}
