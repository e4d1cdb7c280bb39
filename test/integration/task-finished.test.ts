import { randomUUID } from "node:crypto";
import { Code, createClient, WorkerService } from "@drover/proto";
import { metrics } from "@drover/telemetry";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster } from "../support/in-process.js";

/**
 * TaskFinished names a task, its run, its phase and how the attempt ended: the coordinator checks
 * the three against the database before advancing a run on a worker's word, and counts the reports.
 */
let c: Cluster;
let rpc: ReturnType<typeof createClient<typeof WorkerService>>;

beforeAll(async () => {
  c = await startCluster({ workers: 0 });
  rpc = createClient(WorkerService, c.coordinator.address, {
    metadata: () => ({ authorization: `Bearer ${c.tokens.worker}` }),
  });
});
afterAll(async () => {
  rpc?.close();
  await c?.close();
});

/** A live run with pending tasks (no worker takes them), and one of them. */
async function runWithTask(): Promise<{ runId: string; taskId: string; phase: number }> {
  const run = await c.start(`tf-${randomUUID().slice(0, 8)}`, ["organizations"], `acct-${randomUUID()}`);
  const [task] = await c.database.db.execute<{ id: string; phase: number }>(
    sql`select id, phase from drover.tasks where run_id = ${run.id}::uuid order by id limit 1`,
  );
  return { runId: run.id, taskId: String(task!.id), phase: task!.phase };
}

/** drover_task_reports_total{outcome, stale}, read from the registry the in-process coordinator shares. */
function reported(outcome: string, stale: boolean): number {
  const counter = metrics.collect().find((m) => m.name === "drover_task_reports_total");
  return counter?.series.get(JSON.stringify([outcome, String(stale)]))?.value ?? 0;
}

describe("TaskFinished", { timeout: 60_000 }, () => {
  it("refuses a task that is not the named run's, and leaves both runs as they were", async () => {
    const a = await runWithTask();
    const b = await runWithTask();
    const before = await c.database.db.execute(
      sql`select id, status, current_phase from drover.runs where id in (${a.runId}::uuid, ${b.runId}::uuid) order by id`,
    );
    const err = await rejection(
      rpc.taskFinished({ taskId: a.taskId, runId: b.runId, outcome: "succeeded", phase: a.phase }),
    );
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.message).toContain(`task ${a.taskId} is not a task of run ${b.runId}`);
    const after = await c.database.db.execute(
      sql`select id, status, current_phase from drover.runs where id in (${a.runId}::uuid, ${b.runId}::uuid) order by id`,
    );
    expect(after).toEqual(before);
  });

  it("refuses a phase the task is not in, an outcome no attempt ends with, and a task id that is not one", async () => {
    const a = await runWithTask();
    const wrongPhase = await rejection(
      rpc.taskFinished({ taskId: a.taskId, runId: a.runId, outcome: "succeeded", phase: a.phase + 3 }),
    );
    expect(wrongPhase.code).toBe(Code.INVALID_ARGUMENT);
    expect(wrongPhase.message).toContain(`is in phase ${a.phase}, not ${a.phase + 3}`);
    const badOutcome = await rejection(
      rpc.taskFinished({ taskId: a.taskId, runId: a.runId, outcome: "exploded\n", phase: a.phase }),
    );
    expect(badOutcome.code).toBe(Code.INVALID_ARGUMENT);
    expect(badOutcome.message).toBe(
      'outcome must be one of succeeded, failed, cancelled, released, got "exploded\\n"',
    );
    const badId = await rejection(
      rpc.taskFinished({ taskId: "1 or 1=1", runId: a.runId, outcome: "succeeded", phase: a.phase }),
    );
    expect(badId.code).toBe(Code.INVALID_ARGUMENT);
    expect(badId.message).toMatch(/^task_id must be a positive whole number/);
  });

  it("counts a report that agrees with the task's row, and one the task has moved on from as stale", async () => {
    const a = await runWithTask();
    await c.database.db.execute(
      sql`update drover.tasks set status = 'failed', finished_at = now() where id = ${a.taskId}`,
    );
    const agreed = reported("failed", false);
    await rpc.taskFinished({ taskId: a.taskId, runId: a.runId, outcome: "failed", phase: a.phase });
    expect(reported("failed", false)).toBe(agreed + 1);
    // The task was retried since (pending again): the report is stale, the row wins.
    const stale = reported("succeeded", true);
    await rpc.taskFinished({ taskId: a.taskId, runId: a.runId, outcome: "succeeded", phase: a.phase });
    expect(reported("succeeded", true)).toBe(stale + 1);
  });
});
