import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { type Db, openDatabase, runs } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { runAssignment, seedContext, sourceSecretContext, toRunInfo } from "@drover/engine";
import type { Provider, SeedContext, TaskSeed } from "@drover/provider-sdk";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll } from "vitest";
import { hubspotProvider } from "../src/index.js";

/** The engine's registry as these tests need it: the hubspot source alone, by its name. */
const providers: ReadonlyMap<string, Provider> = new Map([[hubspotProvider.name, hubspotProvider]]);

/**
 * A test file's hubspot account: a fresh database and a keyring of its own, opened before the
 * file's tests and closed after them. Tasks run in process through the engine (runAssignment): the
 * ledger, windows and checkpoints are the real ones, without a coordinator or a queue.
 */
export function hubspotTestAccount(name: string) {
  const secrets = new SecretKeyring(parseSecretKeys(generateSecretKey(name)));
  let testDb: TestDatabase | undefined;
  let database: ReturnType<typeof openDatabase> | undefined;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = openDatabase(testDb.url, { max: 4 });
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
  });
  return {
    secrets,
    get db(): Db {
      return database!.db;
    },
  };
}

/** A running hubspot run of the provider's whole plan, its token sealed as the coordinator stores it. */
export async function insertHubSpotRun(
  db: Db,
  secrets: SecretKeyring,
  run: { tenantId: string; sourceAccount: string; baseUrl: string; settings?: Record<string, string> },
): Promise<string> {
  const plan = hubspotProvider.phases.map((p) => [...p]);
  const sourceConfig = { baseUrl: run.baseUrl, settings: run.settings ?? {} };
  const [row] = await db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, source_config, current_phase, started_at)
    values (${run.tenantId}, 'hubspot', ${run.sourceAccount}, ${sql.param(plan.flat())}::text[], ${JSON.stringify(plan)}::jsonb,
            'running', ${JSON.stringify(sourceConfig)}::jsonb, 0, now())
    returning id`);
  const sealed = secrets.seal("pat-test", sourceSecretContext(row!.id));
  await db.execute(sql`
    update drover.runs set source_secret_ciphertext = ${sealed.ciphertext}, source_secret_key_id = ${sealed.keyId}
     where id = ${row!.id}::uuid`);
  return row!.id;
}

/** Inserts `seeds` as tasks of the run in `phase` and runs every pending task, successors included. */
export async function drainSeeds(
  db: Db,
  secrets: SecretKeyring,
  runId: string,
  seeds: readonly TaskSeed[],
  phase: number,
): Promise<void> {
  for (const seed of seeds)
    await db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, ${seed.kind}, ${phase}, ${seed.seedKey}, ${JSON.stringify(seed.cursor)}::jsonb)`);
  for (;;) {
    const pending = await db.execute<{ id: string }>(
      sql`select id from drover.tasks where run_id = ${runId}::uuid and status = 'pending' order by id`,
    );
    if (pending.length === 0) return;
    for (const t of pending)
      await runAssignment(
        { db, providers, workerId: "hubspot-drain", maxAttempts: 3, notesCap: 1000, secrets },
        Number(t.id),
        { shutdown: new AbortController().signal, working: () => {} },
      );
  }
}

/** Seeds the provider's phases `from` to `to` (inclusive, as the barrier would) and drains each. */
export async function drainPhases(
  db: Db,
  secrets: SecretKeyring,
  runId: string,
  from = 0,
  to = 3,
): Promise<void> {
  const [run] = await db.select().from(runs).where(eq(runs.id, runId));
  for (let phase = from; phase <= to; phase++) {
    const kinds = [...hubspotProvider.phases[phase]!];
    const seeds = await hubspotProvider.seedPhase(
      seedContext(db as unknown as SeedContext["tx"], toRunInfo(run!), phase, kinds),
    );
    await drainSeeds(db, secrets, runId, seeds, phase);
  }
}
