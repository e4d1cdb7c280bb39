import type { SecretKeyring } from "@drover/auth";
import { type Db, runs } from "@drover/db";
import { runAssignment, seedContext, toRunInfo, type VerificationResult, verifyRun } from "@drover/engine";
import type { SeedContext } from "@drover/provider-sdk";
import { eq, sql } from "drizzle-orm";
import { crmProvider } from "../src/provider.js";
import { crmProviders as providers } from "./crm-providers.js";

export type DrainedTask = {
  id: string;
  kind: string;
  seed_key: string;
  status: string;
  last_error: string | null;
};

/**
 * Seeds `kinds` of a run (inserted by insertCrmRun) as the coordinator would, phase by phase in the
 * order given, and runs every task, successors included, until none is pending.
 */
export async function drainKinds(
  db: Db,
  secrets: SecretKeyring,
  runId: string,
  phases: readonly (readonly string[])[],
): Promise<DrainedTask[]> {
  const [run] = await db.select().from(runs).where(eq(runs.id, runId));
  for (const [phase, kinds] of phases.entries()) {
    const seeds = await crmProvider.seedPhase(
      seedContext(
        db as unknown as SeedContext["tx"],
        { ...toRunInfo(run!), plan: phases.map((p) => [...p]) },
        phase,
        [...kinds],
      ),
    );
    for (const seed of seeds)
      await db.execute(sql`
        insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
        values (${runId}::uuid, ${seed.kind}, ${phase}, ${seed.seedKey}, ${JSON.stringify(seed.cursor)}::jsonb)`);
    for (;;) {
      const pending = await db.execute<{ id: string }>(
        sql`select id from drover.tasks where run_id = ${runId}::uuid and status = 'pending' order by id`,
      );
      if (pending.length === 0) break;
      for (const t of pending)
        await runAssignment(
          { db, providers, workerId: "crm-drain", maxAttempts: 3, notesCap: 1000, secrets },
          Number(t.id),
          { shutdown: new AbortController().signal, working: () => {} },
        );
    }
  }
  return db.execute<DrainedTask>(
    sql`select id, kind, seed_key, status, last_error from drover.tasks where run_id = ${runId}::uuid order by id`,
  );
}

/** Verifies the run as the coordinator's verification would, with the source token given. */
export async function verifyCrmRun(
  db: Db,
  runId: string,
  token: string,
  sampleSize: number,
): Promise<VerificationResult> {
  const [run] = await db.select().from(runs).where(eq(runs.id, runId));
  return verifyRun(db, crmProvider, run!, { sampleSize, secret: token });
}

/** Runs one task of the run from `cursor`, as a worker would. */
export async function runOneTask(
  db: Db,
  secrets: SecretKeyring,
  runId: string,
  task: { kind: string; seedKey: string; cursor: unknown; phase?: number },
): Promise<DrainedTask> {
  const [row] = await db.execute<{ id: string }>(sql`
    insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
    values (${runId}::uuid, ${task.kind}, ${task.phase ?? 0}, ${task.seedKey}, ${JSON.stringify(task.cursor)}::jsonb)
    returning id`);
  await runAssignment(
    { db, providers, workerId: "crm-drain", maxAttempts: 3, notesCap: 1000, secrets },
    Number(row!.id),
    { shutdown: new AbortController().signal, working: () => {} },
  );
  const [done] = await db.execute<DrainedTask>(
    sql`select id, kind, seed_key, status, last_error from drover.tasks where id = ${row!.id}`,
  );
  return done!;
}
