import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { kindDone, statusName } from "@drover/cli";
import { openDatabase } from "@drover/db";
import {
  accountFor,
  accountingProblems,
  type Cluster,
  CRM_TABLES,
  HUBSPOT_TABLES,
  startCluster,
} from "@drover/local-cluster";
import { type Client, createClient, type Run, RunService, RunStatus, type Verification } from "@drover/proto";
import { sql } from "drizzle-orm";
import { type DemoFlags, type DemoSource, parseDemoFlags, USAGE } from "./flags.js";
import { prepareDemoServices } from "./prepare.js";
import { followRun, ProgressView } from "./progress.js";
import { keepInstructions, legend, reasonsBlock, seededLine, verificationBlock } from "./report.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/drover_demo";
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const SOURCE_ACCOUNT = "sandbox-company";
const API_TOKEN = "demo-api-token";

/** What the demo knows of each source: its sandbox's name, and the product table each kind writes. */
const SOURCES: Readonly<Record<DemoSource, { sandbox: string; tables: Readonly<Record<string, string>> }>> = {
  crm: { sandbox: "CRM (Pipedrive) sandbox", tables: CRM_TABLES },
  hubspot: { sandbox: "HubSpot sandbox", tables: HUBSPOT_TABLES },
};

type DemoDatabase = ReturnType<typeof openDatabase>["db"];
type DemoClient = Client<typeof RunService>;

/** What the sandbox serves, by its own account: the ids per kind (some malformed), and their totals. */
interface SandboxTruth {
  kinds: Record<string, { ids: string[]; malformed: string[] }>;
  totals: Record<string, number>;
  sourceRows: number;
}

async function main(): Promise<number> {
  let flags: DemoFlags;
  try {
    flags = parseDemoFlags(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }

  if (!(await prepareDemoServices(DATABASE_URL, NATS_URL))) return 1;

  const cluster = await startDemoCluster(flags);
  // The cluster's admin key lives as long as the demo: the page and the CLI need one to call the coordinator.
  const coordinatorAddress = cluster.coordinatorAddresses[0]!;
  const database = openDatabase(DATABASE_URL, { max: 2 });
  const client = createClient(RunService, coordinatorAddress, {
    metadata: () => ({ authorization: `Bearer ${cluster.adminToken}` }),
  });
  const onSignal = () => {
    process.stdout.write("\ninterrupted: stopping the services\n");
    void cluster.stop().then(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  try {
    const truth = await sandboxTruth(flags.source, cluster.sandboxUrl);
    const { last, started } = await importSandbox(client, database.db, flags, cluster.sandboxUrl, truth);
    const issues = await demoProblems(client, database.db, flags, truth, last, started);

    if (flags.keep) {
      // Ctrl-C now ends the wait, and the services stop as after any run.
      process.off("SIGINT", onSignal);
      await keepUntilInterrupted(cluster, flags.source, last.id);
    }
    return verdict(issues, last, truth.sourceRows);
  } finally {
    process.off("SIGINT", onSignal);
    client.close();
    await database.close();
    await cluster.stop();
  }
}

/** The sandbox, one coordinator, the workers and the run page, and how to reach them. */
async function startDemoCluster(flags: DemoFlags): Promise<Cluster> {
  const queuePrefix = `demo-${randomBytes(3).toString("hex")}`;
  process.stdout.write(
    `Starting the ${SOURCES[flags.source].sandbox}, 1 coordinator and ${flags.workers} workers (logs in .artifacts/logs/${queuePrefix}/)\n`,
  );
  const cluster = await startCluster({
    databaseUrl: DATABASE_URL,
    natsUrl: NATS_URL,
    queuePrefix,
    workers: flags.workers,
    laneWidth: flags.lane,
    sandbox: flags.sandbox,
    sandboxSource: flags.source,
    env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    dashboard: true,
  });
  const coordinatorAddress = cluster.coordinatorAddresses[0]!;
  process.stdout.write(
    `Coordinator (gRPC): ${coordinatorAddress}; the CLI reaches it with DROVER_ADDRESS=${coordinatorAddress} DROVER_TOKEN=${cluster.adminToken}\n` +
      `Run page: ${cluster.dashboardUrl} (enter this API key there: ${cluster.adminToken})\n`,
  );
  return cluster;
}

async function sandboxTruth(source: DemoSource, sandboxUrl: string): Promise<SandboxTruth> {
  const body = (await (await fetch(`${sandboxUrl}/__sandbox/truth`)).json()) as unknown;
  const kinds = source === "crm" ? crmTruth(body) : hubspotTruth(body);
  const totals = Object.fromEntries(Object.entries(kinds).map(([k, t]) => [k, t.ids.length]));
  const sourceRows = Object.values(totals).reduce((a, b) => a + b, 0);
  return { kinds, totals, sourceRows };
}

function crmTruth(body: unknown): SandboxTruth["kinds"] {
  return (body as { kinds: SandboxTruth["kinds"] }).kinds;
}

/** HubSpot's sandbox lists each type's live and archived (deleted) ids: both are source rows to import. */
function hubspotTruth(body: unknown): SandboxTruth["kinds"] {
  const { types } = body as { types: Record<string, { live: string[]; archived: string[] }> };
  return Object.fromEntries(
    Object.entries(types).map(([type, ids]) => [
      type,
      { ids: [...ids.live, ...ids.archived], malformed: [] },
    ]),
  );
}

/**
 * The migration itself: seeds the product, starts the run over gRPC and follows it to its end, then
 * prints the legend and why rows were skipped or failed. Returns the run as it ended, and when the
 * run was asked for (after the seeding: the contacts seeded are the product's own, not the run's).
 */
async function importSandbox(
  client: DemoClient,
  db: DemoDatabase,
  flags: DemoFlags,
  sandboxUrl: string,
  truth: SandboxTruth,
): Promise<{ last: Run; started: number }> {
  const tenant = flags.tenant;
  const existing = await seedExistingContacts(db, tenant, await existingContacts(flags.source, sandboxUrl));
  if (existing > 0) process.stdout.write(`${seededLine(existing, tenant)}\n`);

  const started = Date.now();
  const { run } = await client.startRun({
    tenantId: tenant,
    source: flags.source,
    sourceAccount: SOURCE_ACCOUNT,
    sourceConfig: { baseUrl: sandboxUrl, apiToken: API_TOKEN },
  });
  process.stdout.write(`StartRun: run ${run!.id} for tenant "${tenant}", ${truth.sourceRows} source rows\n`);

  const last = await followRun(client, run!, new ProgressView(truth.totals), started);

  process.stdout.write(`${legend()}\n\n`);

  const { groups } = await client.listNotes({ runId: last.id, samples: 3 });
  if (groups.length > 0) process.stdout.write(`${reasonsBlock(groups, last.id)}\n\n`);
  return { last, started };
}

/**
 * What the demo found wrong, if anything: a source row not accounted for (since `started`), a kind
 * the final table miscounts, a verification that did not pass. Prints the verification.
 */
async function demoProblems(
  client: DemoClient,
  db: DemoDatabase,
  flags: DemoFlags,
  truth: SandboxTruth,
  last: Run,
  started: number,
): Promise<string[]> {
  const accounts = await accountFor(
    db,
    { tenantId: flags.tenant, source: flags.source, sourceAccount: SOURCE_ACCOUNT, since: new Date(started) },
    truth.kinds,
    SOURCES[flags.source].tables,
  );
  const issues = [...accountingProblems(accounts), ...tableProblems(last, truth.totals)];

  // The run's verification reads the sandbox: it must end before anything stops, or a later
  // demo's workers would retry it against a sandbox that is gone.
  process.stdout.write("Verifying the run against the sandbox (a worker counts and samples every kind)...\n");
  const verifyStarted = Date.now();
  const verification = await awaitVerification(client, last.id);
  process.stdout.write(
    `${verificationBlock(verification, last.id)}\n(the verification ended ${((Date.now() - verifyStarted) / 1000).toFixed(1)} s after the run)\n\n`,
  );
  if (!verification.ok)
    issues.push(
      verification.error
        ? `the verification could not finish: ${verification.error}`
        : "the verification found problems",
    );
  return issues;
}

/** --keep: says how to reach the services and the run, then waits for Ctrl-C. */
async function keepUntilInterrupted(cluster: Cluster, source: DemoSource, runId: string): Promise<void> {
  process.stdout.write(
    `${keepInstructions({
      coordinatorAddress: cluster.coordinatorAddresses[0]!,
      adminToken: cluster.adminToken,
      dashboardUrl: cluster.dashboardUrl,
      sandboxUrl: cluster.sandboxUrl,
      sandboxToken: API_TOKEN,
      source,
      sourceAccount: SOURCE_ACCOUNT,
      runId,
    })}\n`,
  );
  await new Promise<void>((resolve) => process.once("SIGINT", () => resolve()));
}

/** The demo's last line, and its exit code: 0 only if the run succeeded and nothing is wrong. */
function verdict(issues: string[], last: Run, sourceRows: number): number {
  if (issues.length === 0 && last.status === RunStatus.SUCCEEDED) {
    process.stdout.write(
      `Every one of the ${sourceRows} source rows is accounted for: in the ledger, or failed with a reason; the run is verified.\n`,
    );
    return 0;
  }
  process.stdout.write(
    `The demo found problems:\n  - ${issues.join("\n  - ") || `the run ended ${statusName(last.status)}`}\n`,
  );
  return 1;
}

/** How long the demo waits for the automatic verification before it asks for one itself. */
const AUTOMATIC_VERIFICATION_MS = 60_000;
/** VerifyRun's deadline: a verification of the default sandbox takes seconds. */
const VERIFY_DEADLINE_MS = 5 * 60_000;

/**
 * The finished run's verification: the one the coordinator asks for by itself when a run ends
 * (GetRun shows it once a worker has stored it), or, if it has not come within a minute, one asked
 * for with VerifyRun, which waits for it.
 */
async function awaitVerification(client: DemoClient, runId: string): Promise<Verification> {
  const until = Date.now() + AUTOMATIC_VERIFICATION_MS;
  while (Date.now() < until) {
    const { run } = await client.getRun({ runId });
    if (run?.verification) return run.verification;
    await sleep(500);
  }
  const { verification } = await client.verifyRun(
    { runId },
    { deadline: new Date(Date.now() + VERIFY_DEADLINE_MS) },
  );
  return verification!;
}

/**
 * A product that already knows some of the customer's contacts: on the tenant's first run, every
 * 25th sandbox contact with an email exists already, so the run shows "matched" rather than creating twins.
 */
async function seedExistingContacts(
  db: DemoDatabase,
  tenantId: string,
  contacts: readonly { name: string; email: string }[],
): Promise<number> {
  const [known] = await db.execute<{ n: string }>(
    sql`select count(*) as n from app.contacts where tenant_id = ${tenantId}`,
  );
  if (Number(known?.n ?? 0) > 0) return 0;
  const picks = contacts.filter((_, i) => i % 25 === 0);
  for (const p of picks) {
    await db.execute(
      sql`insert into app.contacts (tenant_id, name, email) values (${tenantId}, ${p.name}, ${p.email})`,
    );
  }
  return picks.length;
}

/** The sandbox's first contacts that have an email, read as a customer's product would have them. */
async function existingContacts(
  source: DemoSource,
  sandboxUrl: string,
): Promise<{ name: string; email: string }[]> {
  const withEmail = (c: { name: string; email: unknown }): c is { name: string; email: string } =>
    typeof c.email === "string" && c.email.includes("@");
  if (source === "hubspot") {
    const res = await fetch(
      `${sandboxUrl}/crm/v3/objects/contacts?limit=100&properties=firstname,lastname,email`,
      { headers: { authorization: `Bearer ${API_TOKEN}` } },
    );
    const body = (await res.json()) as { results?: { properties: Record<string, string | null> }[] };
    return (body.results ?? [])
      .map(({ properties: p }) => ({
        name: [p.firstname, p.lastname].filter(Boolean).join(" ") || "Existing contact",
        email: p.email,
      }))
      .filter(withEmail);
  }
  const res = await fetch(`${sandboxUrl}/v1/persons?start=0&limit=500`, {
    headers: { "x-api-token": API_TOKEN },
  });
  const body = (await res.json()) as { data: { name?: unknown; email?: { value?: unknown }[] }[] | null };
  return (body.data ?? [])
    .map((p) => ({
      name: typeof p.name === "string" ? p.name : "Existing contact",
      email: p.email?.[0]?.value,
    }))
    .filter(withEmail);
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
