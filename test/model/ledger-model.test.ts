import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster } from "../support/in-process.js";
import {
  asPrediction,
  changeRound,
  checkInvariants,
  initialModel,
  MAX_ROUNDS,
  type Model,
  passFinishedAfter,
  predicted,
  until,
  World,
} from "./account-model.js";

/**
 * The ledger's operations drawn as sequences (fast-check's model-based commands) and run against
 * the real services: start, stop and resume, a worker stopped mid-run, re-drive by reason or by
 * ids, revert (of a finished or of a stopped run), start again, follow with rounds of edits,
 * additions and deletions, complete, and dry run. After every step the product, the ledger and
 * GetRun's counts are checked against the model (account-model.ts). One cluster serves every
 * sequence, each on a fresh tenant and sandbox. A failure shrinks to a shortest sequence and
 * prints the seed, path and replay path that replay it:
 * `pnpm test:model -- --seed S --path P --replay-path R`.
 */
const RUNS = Number(process.env.DROVER_MODEL_RUNS ?? 100);
const SEED = process.env.DROVER_MODEL_SEED ? Number(process.env.DROVER_MODEL_SEED) : undefined;
const PATH = process.env.DROVER_MODEL_PATH || undefined;
/** The counterexample's `replayPath="…"`: with the seed and path, replays its commands exactly. */
const REPLAY_PATH = process.env.DROVER_MODEL_REPLAY_PATH || undefined;
const MAX_COMMANDS = Number(process.env.DROVER_MODEL_MAX_COMMANDS ?? 7);
/** In `pnpm test`, at most about four minutes; `pnpm test:model -- --runs N` runs all N. */
const TIME_LIMIT_MS = Number(
  process.env.DROVER_MODEL_TIME_LIMIT_MS ?? (process.env.DROVER_MODEL_RUNS ? 24 * 3_600_000 : 225_000),
);

type Cmd = fc.AsyncCommand<Model, World>;

/** A command whose step ends with the invariants checked. */
abstract class Step implements Cmd {
  abstract check(m: Readonly<Model>): boolean;
  /** The run whose verification must come out ok, awaited beside the invariants. */
  protected verify: string | undefined;
  abstract step(m: Model, w: World, prediction: Model["prediction"]): Promise<void>;
  abstract toString(): string;
  async run(m: Model, w: World): Promise<void> {
    const prediction = m.prediction;
    m.prediction = null;
    const t0 = Date.now();
    this.verify = undefined;
    await this.step(m, w, prediction);
    const t1 = Date.now();
    const checks = await Promise.allSettled([
      checkInvariants(m, w),
      this.verify ? w.expectVerified(this.verify) : undefined,
    ]);
    const failed = checks.find((c): c is PromiseRejectedResult => c.status === "rejected");
    if (failed) throw failed.reason;
    if (process.env.DROVER_MODEL_LOG) console.log(`${this} ${t1 - t0} ms, checks ${Date.now() - t1} ms`);
  }
}

/** A plain import, into an empty product or over one that already holds the account as it is. */
class Start extends Step {
  check = (m: Readonly<Model>) => !m.live && (m.product === "empty" || m.product === m.round);
  async step(m: Model, w: World, prediction?: Model["prediction"]): Promise<void> {
    const run = await w.finished((await w.start()).id);
    expect(run.status).toBe(RunStatus.SUCCEEDED);
    // The dry run just before, with nothing changed since, said what this run would do.
    if (prediction) expect(asPrediction(run)).toEqual(predicted(prediction));
    if (m.product === "empty") m.owner = run.id;
    m.product = m.round;
    m.runs.push(run.id);
    this.verify = run.id;
  }
  toString = () => "start";
}

/** An import stopped as soon as it started: stopped part-way, or already done. */
class StartStopped extends Step {
  check = (m: Readonly<Model>) => !m.live && m.product === "empty";
  async step(m: Model, w: World): Promise<void> {
    const started = await w.start();
    await w.c.client.stopRun({ runId: started.id }).catch(() => undefined);
    const run = await w.finished(started.id);
    m.owner = run.id;
    if (run.status === RunStatus.STOPPED) {
      m.live = { id: run.id, follow: false, stopped: true };
      m.product = "partial";
      return;
    }
    expect(run.status).toBe(RunStatus.SUCCEEDED);
    m.product = m.round;
    m.runs.push(run.id);
  }
  toString = () => "start+stop";
}

/** The live run, sent on its way (resumed, completed), ends succeeded and holds the account as it is now. */
async function liveRunSucceeded(m: Model, w: World, id: string): Promise<string> {
  const run = await w.finished(id);
  expect(run.status).toBe(RunStatus.SUCCEEDED);
  m.live = null;
  m.product = m.round;
  m.runs.push(id);
  return id;
}

class Resume extends Step {
  check = (m: Readonly<Model>) => m.live?.stopped === true;
  async step(m: Model, w: World): Promise<void> {
    const id = m.live!.id;
    await w.c.client.resumeRun({ runId: id });
    this.verify = await liveRunSucceeded(m, w, id);
  }
  toString = () => "resume";
}

/** An import during which one worker stops (hands its tasks back) and another joins. */
class StartWorkerStopped extends Step {
  check = (m: Readonly<Model>) => !m.live && m.product === "empty";
  async step(m: Model, w: World): Promise<void> {
    const started = await w.start();
    const victim = w.c.workers.find((wk) => wk.state === "RUNNING");
    await until(
      async () => (await w.getRun(started.id)).progress.some((p) => p.imported > 0n) || undefined,
      20_000,
      "the run to write",
    ).catch(() => undefined);
    if (victim) {
      await victim.stop();
      await w.c.addWorker();
    }
    const run = await w.finished(started.id);
    expect(run.status).toBe(RunStatus.SUCCEEDED);
    m.owner = run.id;
    m.product = m.round;
    m.runs.push(run.id);
    this.verify = run.id;
  }
  toString = () => "start+worker-stop";
}

/** Re-drives the owner run's failed rows of one reason, by reason or by ids: they are still bad. */
class Redrive extends Step {
  constructor(readonly byIds: boolean) {
    super();
  }
  check = (m: Readonly<Model>) => !m.live && m.owner !== null && typeof m.product === "number";
  async step(m: Model, w: World): Promise<void> {
    const owner = m.owner!;
    const before = await w.getRun(owner);
    const { groups } = await w.c.client.listNotes({ runId: owner, level: "error" });
    const group = groups.find((g) => g.sampleSubjectIds.length > 0);
    if (!group) return;
    await w.c.client.retryRun({
      runId: owner,
      kind: group.kind,
      ...(this.byIds ? { sourceIds: group.sampleSubjectIds } : { reason: group.reason }),
    });
    const run = await w.finished(owner);
    // The source still malforms them: they stay failed, and the run keeps its outcome.
    expect(run.status).toBe(before.status);
    expect(run.progress.map((p) => [p.kind, p.failed])).toEqual(
      before.progress.map((p) => [p.kind, p.failed]),
    );
  }
  toString = () => `redrive-by-${this.byIds ? "ids" : "reason"}`;
}

/** Reverts the run whose records are in the product (finished, or stopped part-way). */
class Revert extends Step {
  check = (m: Readonly<Model>) => m.owner !== null && (!m.live || m.live.stopped);
  async step(m: Model, w: World): Promise<void> {
    const target = m.owner!;
    const [{ n: created } = { n: 0 }] = await w.c.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where run_id = ${target}::uuid and action = 'created'`,
    );
    const { run: started } = await w.c.client.revertRun({ runId: target });
    const revert = await w.finished(started!.id);
    expect(revert.status).toBe(RunStatus.SUCCEEDED);
    // Everything the run created is removed (or was gone already), nothing kept.
    expect(revert.revert?.kept).toBe(0n);
    expect(revert.revert?.removed).toBe(BigInt(created));
    m.owner = null;
    m.live = null;
    m.product = "empty";
    m.runs = m.runs.filter((id) => id !== target);
  }
  toString = () => "revert";
}

class StartFollow extends Step {
  check = (m: Readonly<Model>) => !m.live && m.product === "empty";
  async step(m: Model, w: World): Promise<void> {
    const started = await w.start({ follow: true });
    await passFinishedAfter(w, started.id, new Date(0));
    m.live = { id: started.id, follow: true, stopped: false };
    m.owner = started.id;
    m.product = m.round;
  }
  toString = () => "follow";
}

/** A round of edits, additions and deletions at the source, caught by the follow run. */
class Change extends Step {
  check = (m: Readonly<Model>) => m.live?.follow === true && m.round < MAX_ROUNDS;
  async step(m: Model, w: World): Promise<void> {
    const at = await changeRound(w, m.round === 0);
    m.round++;
    await passFinishedAfter(w, m.live!.id, at);
    m.product = m.round;
  }
  toString = () => "change";
}

class Complete extends Step {
  check = (m: Readonly<Model>) => m.live?.follow === true;
  async step(m: Model, w: World): Promise<void> {
    const id = m.live!.id;
    await w.c.client.completeRun({ runId: id });
    this.verify = await liveRunSucceeded(m, w, id);
  }
  toString = () => "complete";
}

/** A dry run: writes nothing; its report is what the next real run must do (checked by Start). */
class DryRun implements Cmd {
  check = (m: Readonly<Model>) => !m.live;
  async run(m: Model, w: World): Promise<void> {
    const t0 = Date.now();
    const run = await w.finished((await w.start({ dryRun: true })).id);
    expect(run.status).toBe(RunStatus.SUCCEEDED);
    m.prediction = run.dryRunReport?.kinds ?? [];
    if (m.product === "empty") {
      const ref = (await w.reference(m.round)).run;
      expect(predicted(m.prediction)).toEqual(asPrediction(ref));
    }
    await checkInvariants(m, w);
    if (process.env.DROVER_MODEL_LOG) console.log(`${this} ${Date.now() - t0} ms, checks 0 ms`);
  }
  toString = () => "dry-run";
}

const commands = [
  fc.constant(new Start()),
  fc.constant(new StartStopped()),
  fc.constant(new Resume()),
  fc.constant(new StartWorkerStopped()),
  fc.boolean().map((byIds) => new Redrive(byIds)),
  fc.constant(new Revert()),
  fc.constant(new StartFollow()),
  fc.constant(new Change()),
  fc.constant(new Complete()),
  fc.constant(new DryRun()),
];

let cluster: Cluster;

beforeAll(async () => {
  // The reaper at its fastest, and a lost publish sent again after 5 s (the least allowed): a
  // sequence waits on barriers, verifications and follow passes they move.
  cluster = await startCluster({
    workers: 2,
    laneWidth: 2,
    coordinatorEnv: { DROVER_REAPER_INTERVAL_MS: "100", DROVER_REDISPATCH_AFTER_MS: "5000" },
  });
});
afterAll(async () => {
  await cluster?.close();
});

describe("the ledger's operations in generated sequences", () => {
  // Not retried: another attempt draws other sequences and could hide the failing one.
  it(`hold the product, the ledger and the counts to the model (${RUNS} sequences)`, {
    retry: 0,
    timeout: TIME_LIMIT_MS + 120_000,
  }, async () => {
    const began = Date.now();
    const details = await fc.check(
      fc.asyncProperty(
        fc.commands(commands, {
          maxCommands: MAX_COMMANDS,
          ...(REPLAY_PATH ? { replayPath: REPLAY_PATH } : {}),
        }),
        async (cmds) => {
          const world = await World.open(cluster);
          if (process.env.DROVER_MODEL_LOG) console.log(`--- sequence on tenant ${world.tenant}`);
          try {
            await fc.asyncModelRun(() => ({ model: initialModel(), real: world }), cmds);
          } finally {
            const t0 = Date.now();
            await settle(world);
            await world.close();
            if (process.env.DROVER_MODEL_LOG) console.log(`settled in ${Date.now() - t0} ms`);
          }
        },
      ),
      {
        numRuns: RUNS,
        ...(SEED !== undefined ? { seed: SEED } : {}),
        ...(PATH ? { path: PATH } : {}),
        // A loaded machine draws fewer sequences rather than overrun the suite's budget; it says so.
        interruptAfterTimeLimit: TIME_LIMIT_MS,
        markInterruptAsFailure: false,
      },
    );
    console.log(
      `model: ${details.numRuns} sequences (seed ${details.seed}) in ${Math.round((Date.now() - began) / 1000)} s${
        details.interrupted ? `, stopped at the ${TIME_LIMIT_MS / 1000} s limit` : ""
      }`,
    );
    if (details.failed) {
      const why =
        details.errorInstance instanceof Error
          ? details.errorInstance
          : new Error(String(details.errorInstance));
      throw new Error(
        `${fc.defaultReportMessage(details) ?? "the model test failed"}\n\nThe step failed with: ${why.message}`,
        {
          cause: why,
        },
      );
    }
  });
});

/**
 * Ends whatever the sequence left live, and waits for the verifications of its finished runs:
 * the sandbox closes next, and a verification still asking it would keep the workers retrying
 * against nothing while the next sequence waits for them.
 */
async function settle(world: World): Promise<void> {
  const { runs } = await world.c.client.listRuns({ tenantId: world.tenant });
  for (const run of runs) {
    if (run.status !== RunStatus.RUNNING && run.status !== RunStatus.PENDING) continue;
    if (run.follow) await world.c.client.completeRun({ runId: run.id }).catch(() => undefined);
    else await world.c.client.stopRun({ runId: run.id }).catch(() => undefined);
    await world.finished(run.id).catch(() => undefined);
  }
  const { runs: after } = await world.c.client.listRuns({ tenantId: world.tenant });
  for (const run of after) {
    const verified = run.status === RunStatus.SUCCEEDED || run.status === RunStatus.FAILED;
    if (!verified || run.dryRun || run.revert?.reverts) continue;
    await until(
      async () => (await world.getRun(run.id)).verification,
      30_000,
      `run ${run.id} verified`,
    ).catch(() => undefined);
  }
}
