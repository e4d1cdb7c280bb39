import { Code, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster, untilFinished } from "../support/in-process.js";

/**
 * A re-drive of rows the source still serves malformed: the rows stay failed with a fresh note, and
 * the run keeps its outcome (a succeeded run stays succeeded). A plain retry agrees: a succeeded run
 * has nothing to retry, so the re-drive and the retry never disagree about what the run came to.
 */
let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ workers: 1, sandbox: { seed: 4242, malformedRate: 0.1 } });
});
afterAll(async () => {
  await c?.close();
});

describe("re-driving rows that are still bad", () => {
  it("keeps the run's outcome and its failed count, and notes the rows again", async () => {
    const first = await untilFinished(c, (await c.start("still-bad", ["organizations", "persons"])).id);
    expect(first.status).toBe(RunStatus.SUCCEEDED);
    const { groups } = await c.client.listNotes({ runId: first.id, level: "error" });
    // A group of at least three rows of one kind: "every row failed" would fail a first pass's task.
    const group = groups.find((g) => g.count >= 3n)!;
    expect(group).toBeDefined();
    const failedBefore = first.progress.map((p) => [p.kind, p.failed]);
    const [{ n: notesBefore } = { n: "0" }] = await c.database.db.execute<{ n: string }>(sql`
      select count(*)::text as n from drover.notes where run_id = ${first.id}::uuid and reason = ${group.reason}`);

    await c.client.retryRun({ runId: first.id, kind: group.kind, reason: group.reason });
    const after = await untilFinished(c, first.id);
    expect(after.status).toBe(RunStatus.SUCCEEDED);
    expect(after.error).toBe("");
    expect(after.progress.map((p) => [p.kind, p.failed])).toEqual(failedBefore);
    // Read again and noted again: each row a second note, the group's count unchanged.
    const [{ n: notesAfter } = { n: "0" }] = await c.database.db.execute<{ n: string }>(sql`
      select count(*)::text as n from drover.notes where run_id = ${first.id}::uuid and reason = ${group.reason}`);
    expect(Number(notesAfter)).toBe(Number(notesBefore) + Number(group.count));
    const again = await c.client.listNotes({ runId: first.id, level: "error", kind: group.kind });
    expect(again.groups.find((g) => g.reason === group.reason)?.count).toBe(group.count);
    const tasks = await c.database.db.execute<{ status: string }>(sql`
      select status from drover.tasks where run_id = ${first.id}::uuid and seed_key like 'redrive:%'`);
    expect(tasks.map((t) => t.status)).toEqual(tasks.map(() => "succeeded"));

    // The plain retry agrees: the run succeeded, there is nothing to retry.
    const retry = await rejection(c.client.retryRun({ runId: first.id }));
    expect(retry.code).toBe(Code.FAILED_PRECONDITION);
  });
});
