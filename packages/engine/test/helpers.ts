import { randomUUID } from "node:crypto";
import { type Database, type Db, openDatabase, runs, type Tx, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import type { Provider, RowWriter, TaskSeed } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { claimTask, toRunInfo } from "../src/index.js";

export interface Harness {
  testDb: TestDatabase;
  database: Database;
  db: Db;
  close(): Promise<void>;
}

export async function openHarness(max = 10): Promise<Harness> {
  const testDb = await createTestDatabase();
  const database = openDatabase(testDb.url, { max });
  return {
    testDb,
    database,
    db: database.db,
    async close() {
      await database.close();
      await testDb.drop();
    },
  };
}

export async function insertRun(
  db: Db,
  overrides: Partial<typeof runs.$inferInsert> = {},
): Promise<typeof runs.$inferSelect> {
  const [run] = await db
    .insert(runs)
    .values({
      tenantId: `tenant-${randomUUID().slice(0, 8)}`,
      source: "test",
      sourceAccount: "acct",
      kinds: ["companies"],
      plan: [["companies"]],
      status: "running",
      startedAt: new Date(),
      ...overrides,
    })
    .returning();
  return run!;
}

export async function insertTask(
  db: Db,
  runId: string,
  overrides: Partial<typeof tasks.$inferInsert> = {},
): Promise<typeof tasks.$inferSelect> {
  const [task] = await db
    .insert(tasks)
    .values({ runId, kind: "companies", phase: 0, seedKey: randomUUID(), cursor: {}, ...overrides })
    .returning();
  return task!;
}

/**
 * A new task of `run`, claimed, as the window writer's deps see it (lane options such as
 * windowSize or windowDeadlineMs in `extra`).
 */
export async function claimedTaskDeps<E extends Record<string, unknown>>(
  db: Db,
  run: typeof runs.$inferSelect,
  extra: E = {} as E,
) {
  const t = await insertTask(db, run.id);
  const c = (await claimTask(db, t.id, `w/${t.id}`))!;
  return {
    db,
    run: toRunInfo(run),
    task: {
      id: c.id,
      kind: "companies",
      phase: 0,
      cursor: c.cursor,
      processedOffset: c.processedOffset,
      attempts: c.attempts,
    },
    claimToken: c.lockedBy!,
    notesCap: 1000,
    stopRequested: async () => false,
    ...extra,
  };
}

/** Writes a company named after the row; a null name violates NOT NULL, which is a row error. */
export const companyWriter: RowWriter<{ name: string | null }> = async (tx: Tx, row) => {
  const [r] = await tx.execute<{ id: string }>(sql`
    insert into app.companies (tenant_id, name) values ('t', ${row.name}) returning id`);
  return { action: "created", recordType: "company", recordId: Number(r!.id) };
};

export function testProvider(seedPhase: (phase: number) => TaskSeed[], onSeed?: () => void): Provider {
  return {
    name: "test",
    phases: [["companies"], ["contacts"]],
    validateConfig: () => undefined,
    async seedPhase(ctx) {
      onSeed?.();
      return seedPhase(ctx.phase);
    },
    async runTask() {
      return {};
    },
  };
}

/** A promise and its resolver, to line racers up without sleeping. */
export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A run to admit (admitRun) of the test source, one phase of companies. */
export function newRun(tenantId: string, sourceAccount = "acct") {
  return {
    id: crypto.randomUUID(),
    tenantId,
    source: "test",
    sourceAccount,
    kinds: ["companies"],
    plan: [["companies"]],
    sourceConfig: {},
    sourceSecretCiphertext: null,
    sourceSecretKeyId: null,
    traceContext: {},
  };
}
