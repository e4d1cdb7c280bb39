import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { type Sandbox, type SandboxOptions, startSandbox } from "@drover/crm-sandbox";
import { type Db, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { addSummary, emptySummary, runAssignment, sourceSecretContext } from "@drover/engine";
import type { WriteSummary } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll } from "vitest";
import { crmProviders as providers } from "./crm-providers.js";

/**
 * A test file's crm account: a fresh database and a keyring of its own, and sandboxes that accept
 * `token`, opened before the file's tests and closed after them.
 */
export function crmTestAccount(name: string) {
  const token = `${name}-token`;
  const secrets = new SecretKeyring(parseSecretKeys(generateSecretKey(name)));
  const sandboxes: Sandbox[] = [];
  let testDb: TestDatabase | undefined;
  let database: ReturnType<typeof openDatabase> | undefined;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = openDatabase(testDb.url, { max: 4 });
  });
  afterAll(async () => {
    await Promise.all(sandboxes.map((s) => s.close()));
    await database?.close();
    await testDb?.drop();
  });
  return {
    token,
    secrets,
    get db(): Db {
      return database!.db;
    },
    /** The test database's URL, for a second connection of the test's own. */
    get url(): string {
      return testDb!.url;
    },
    async sandbox(options: SandboxOptions = {}): Promise<Sandbox> {
      const s = await startSandbox({ port: 0, tokens: [token], ...options });
      sandboxes.push(s);
      return s;
    },
  };
}

/**
 * A running crm run of one phase holding `kinds`, its API token sealed for this run as the
 * coordinator stores it: only the task runner opens it. Returns the run's id.
 */
export async function insertCrmRun(
  db: Db,
  secrets: SecretKeyring,
  run: {
    tenantId: string;
    sourceAccount: string;
    kinds: readonly string[];
    baseUrl: string;
    token: string;
    settings?: Record<string, string>;
    startedAt?: Date;
  },
): Promise<string> {
  const sourceConfig = { baseUrl: run.baseUrl, settings: run.settings ?? {} };
  const [row] = await db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, source_config, current_phase, started_at)
    values (${run.tenantId}, 'crm', ${run.sourceAccount}, ${sql.param([...run.kinds])}::text[], ${JSON.stringify([run.kinds])}::jsonb,
            'running', ${JSON.stringify(sourceConfig)}::jsonb, 0, ${(run.startedAt ?? new Date()).toISOString()}::timestamptz)
    returning id`);
  const sealed = secrets.seal(run.token, sourceSecretContext(row!.id));
  await db.execute(sql`
    update drover.runs set source_secret_ciphertext = ${sealed.ciphertext}, source_secret_key_id = ${sealed.keyId}
     where id = ${row!.id}::uuid`);
  return row!.id;
}

/**
 * Inserts `seeds` as tasks of the run (in phase `phase`) and runs every pending task of the run in
 * process, successors included, until none is pending. Returns the summed write summary and the
 * outcomes' statuses, for tests that want a phase's tasks done without a coordinator.
 */
export async function drainTasks(
  db: Db,
  secrets: SecretKeyring,
  runId: string,
  seeds: readonly { kind: string; seedKey: string; cursor: unknown }[],
  phase = 0,
): Promise<{ summary: WriteSummary; statuses: string[] }> {
  for (const seed of seeds)
    await db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, ${seed.kind}, ${phase}, ${seed.seedKey}, ${JSON.stringify(seed.cursor)}::jsonb)`);
  const summary = emptySummary();
  const statuses: string[] = [];
  for (;;) {
    const pending = await db.execute<{ id: string }>(
      sql`select id from drover.tasks where run_id = ${runId}::uuid and status = 'pending' order by id`,
    );
    if (pending.length === 0) return { summary, statuses };
    for (const t of pending) {
      const outcome = await runAssignment(
        { db, providers, workerId: "drain", maxAttempts: 3, notesCap: 1000, secrets },
        Number(t.id),
        { shutdown: new AbortController().signal, working: () => {} },
      );
      statuses.push(outcome.status);
      if ("summary" in outcome && outcome.summary) addSummary(summary, outcome.summary);
    }
  }
}
