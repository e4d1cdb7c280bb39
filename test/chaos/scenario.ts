import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bearer } from "@drover/auth";
import { leaderAddress } from "@drover/db";
import {
  accountFor,
  accountingProblems,
  CRM_TABLES,
  HUBSPOT_TABLES,
  type KindAccount,
  REPO_ROOT,
  type ServiceProcess,
} from "@drover/local-cluster";
import {
  createClient,
  type Run,
  RunService,
  RunStatus,
  timestampDate,
  type Verification,
} from "@drover/proto";
import type { RunningReceiver } from "@drover/receiver";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { type Harness, openClusterHarness } from "../support/cluster-harness.js";
import { freePort } from "../support/free-port.js";
import {
  CHANGED_COLUMN,
  midRunChangeProblems,
  sourceDeletionProblems,
  withoutUnseenDeletions,
} from "../support/mid-run-changes.js";
import { type NatsCluster, natsServerList, startNatsCluster } from "../support/nats-cluster.js";
import { startTestReceiver } from "../support/receiver.js";
import { type PrivateNats, startPrivateNats } from "./private-nats.js";
import { startPrivatePostgres } from "./private-postgres.js";

/**
 * A chaos run, in the manner of Jepsen: real processes (the CRM sandbox serving malformed rows,
 * transient 5xx and latency; coordinators; workers; a NATS server of the run's own), one migration,
 * and a seeded nemesis that kills workers, kills the leader coordinator, restarts NATS, terminates
 * the workers' database connections and freezes a worker past its ack_wait, while the run goes on.
 * With `nats: "cluster"` NATS is a three-node cluster keeping the stream at three replicas, and the
 * nemesis SIGKILLs its nodes (the stream's leader first) and starts them again.
 * Then a checker: nothing lost, nothing duplicated, nothing unexpected, no verification mismatch,
 * every malformed row failed with its reason. The seed decides the dataset, the sandbox's faults,
 * and what the nemesis does at which point of the run's progress (the share of source rows
 * accounted for), never at which second: a loaded machine runs slower, and the same seed still
 * replays the same faults at the same points. CHAOS_SEED replays it. Results go to
 * .artifacts/chaos/<seed>.json.
 */

export type FaultKind =
  | "kill-worker"
  | "kill-leader"
  | "restart-nats"
  | "terminate-db-connections"
  | "pause-worker"
  | "kill-nats-node"
  | "restart-nats-node"
  | "restart-postgres";
export const FAULT_KINDS: readonly FaultKind[] = [
  "kill-worker",
  "kill-leader",
  "restart-nats",
  "terminate-db-connections",
  "pause-worker",
  "kill-nats-node",
  "restart-nats-node",
  "restart-postgres",
];

export interface ChaosOptions {
  variant: string;
  seed: number;
  /** The source imported from: the CRM (Pipedrive) one unless told. */
  source?: "crm" | "hubspot";
  /** The source's sandbox's flags; the seed is added. */
  sandbox: Record<string, string | number>;
  coordinators: number;
  workers: number;
  laneWidth: number;
  settings: Record<string, string>;
  env: Record<string, string>;
  /**
   * When each fault happens, as points of progress: the share (0 to 1) of the source's rows the run
   * has accounted for. A [min, max] range is drawn from the seed.
   */
  nemesis: {
    /** SIGKILL a worker at `from`, then every [min, max] of progress until LAST_FAULT_AT; null: one kill. None when null. */
    workerKills: { from: number; every: [number, number] | null } | null;
    /** One entry per injection. */
    killLeaderAt: [number, number][];
    restartNatsAt: [number, number][];
    natsDownMs: number;
    terminateDbAt: [number, number][];
    /** null: no worker is frozen. */
    pauseWorkerAt: [number, number] | null;
    /**
     * A NATS cluster's nodes (`nats: "cluster"`): SIGKILL one, the stream's leader unless it was
     * killed before (then another); start the one that is down again, once current.
     */
    killNatsNodeAt?: [number, number][];
    restartNatsNodeAt?: [number, number][];
    /**
     * Restart the run's own PostgreSQL server (`postgres: "private"`), each time a fast shutdown or a
     * crash (SIGKILL of the postmaster) as the seed draws, down for `postgresDownMs`.
     */
    restartPostgresAt?: [number, number][];
    postgresDownMs?: number;
    /** How long the paused worker stays SIGSTOPped: longer than ack_wait (30 s) or DROVER_STALE_TASK_MS. */
    pauseForMs: number;
  };
  /**
   * The run is given up when its progress (rows accounted, tasks done) has not moved for this long.
   * A run that still moves is never timed out for being slow: only the backstop below ends it.
   */
  stallTimeoutMs: number;
  /** A backstop however the run moves. */
  runDeadlineMs: number;
  /** VerifyRun must answer within this. */
  verifyDeadlineMs: number;
  /**
   * One private nats-server (default; `restart-nats` restarts it), or a three-node cluster keeping
   * the stream at three replicas (`kill-nats-node`, `restart-nats-node`).
   */
  nats?: "server" | "cluster";
  /**
   * The machine's shared PostgreSQL (default), or a server of the run's own, which
   * `restart-postgres` restarts (other test files use the shared one meanwhile).
   */
  postgres?: "shared" | "private";
  /**
   * A run that follows its source: the sandbox applies one round of the customer's edits, additions
   * and deletions (its `change-*` flags) at `changeAt` of the run's progress, drawn from the seed,
   * with faults still coming; once every fault is in and a pass begun after the round has finished,
   * the run is completed (CompleteRun) and checked against the source as it is then.
   */
  follow?: {
    intervalSeconds: number;
    changeAt: [number, number];
    /**
     * The run's change feed is the source's webhooks (a receiver of the run's own, the sandbox
     * delivering to it), its passes an hourly reconcile: the round's changes must reach the product
     * through the events, under the faults, before the cutover's reconcile could mend anything.
     */
    webhooks?: boolean;
  };
}

export interface InjectedFault {
  kind: FaultKind;
  /** ms after the run started. */
  t: number;
  /** The share of source rows accounted for when the fault was injected; `planned` is where it was due. */
  progress: number;
  planned: number;
  at: string;
  target?: string;
  detail?: Record<string, unknown>;
}

export interface ChaosReport {
  seed: number;
  variant: string;
  /** After a restart-postgres: from the server accepting connections again to the run's next move. */
  resumedAfterPostgresMs?: number;
  replay: string;
  startedAt: string;
  finishedAt: string;
  runMs: number;
  /** ms from the scenario's start: cluster up, run ended, checker done, VerifyRun answered. */
  timings: Record<string, number>;
  options: ChaosOptions;
  /** What the seed planned, in order; `faults` is what was injected (all of it, or a problem says not). */
  plannedFaults: { at: number; kind: FaultKind }[];
  faults: InjectedFault[];
  faultCounts: Record<FaultKind, number>;
  run: { id: string; status: string; error: string; progress: Record<string, Record<string, number>> };
  sourceRows: number;
  accounts: Array<
    Omit<KindAccount, "lost" | "unexpected" | "malformedNotFailed"> & {
      lost: string[];
      unexpected: string[];
      malformedNotFailed: string[];
      malformed: number;
    }
  >;
  malformedReasons: Record<string, number>;
  verification: { ok: boolean; error: string; kinds: Record<string, Record<string, unknown>> } | undefined;
  checks: {
    runSucceeded: boolean;
    /** Rows missing although the run ended. */
    lost: number;
    /** Rows missing because the run did not end (given up): not reached, not lost. */
    notReached: number;
    duplicated: number;
    unexpected: number;
    malformedNotFailed: number;
    malformedWithoutReason: number;
    /** Rows written again after a commit ("already here" within the run): must be 0. */
    rewritten: number;
    verificationMismatches: number;
    verificationOk: boolean;
    natsStoreKept: boolean;
  };
  problems: string[];
  passed: boolean;
  logDir: string;
  artifact: string;
}

/**
 * What every scenario's checks must read, whatever its faults: nothing lost, duplicated, invented or
 * written twice, every malformed row failed with its reason, and verification clean.
 */
export const EXACT: Omit<ChaosReport["checks"], "natsStoreKept"> = {
  runSucceeded: true,
  lost: 0,
  notReached: 0,
  duplicated: 0,
  unexpected: 0,
  malformedNotFailed: 0,
  malformedWithoutReason: 0,
  rewritten: 0,
  verificationMismatches: 0,
  verificationOk: true,
};

/** A nemesis for a NATS cluster: it kills and restarts nodes at these points and does nothing else. */
export function natsNodeNemesis(
  killNatsNodeAt: [number, number][],
  restartNatsNodeAt: [number, number][] = [],
): ChaosOptions["nemesis"] {
  return {
    workerKills: null,
    killLeaderAt: [],
    restartNatsAt: [],
    natsDownMs: 0,
    terminateDbAt: [],
    pauseWorkerAt: null,
    killNatsNodeAt,
    restartNatsNodeAt,
    pauseForMs: 0,
  };
}

/** mulberry32: small, seeded, good enough to pick faults. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export function chaosSeed(): number {
  const fromEnv = process.env.CHAOS_SEED;
  if (fromEnv !== undefined && fromEnv !== "") {
    const n = Number(fromEnv);
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
      throw new Error(`CHAOS_SEED must be an integer from 0 to 4294967295, got "${fromEnv}"`);
    return n;
  }
  return Math.floor(Math.random() * 0xffffffff);
}

interface PlannedFault {
  /** A point of progress (share of source rows accounted for). */
  at: number;
  kind: FaultKind;
}

/** No fault is planned past this share of progress: the run must still be going when it is due. */
const LAST_FAULT_AT = 0.9;

/** The seed alone decides the plan: which faults, how many, at which points of progress. */
export function plan(options: ChaosOptions, random: () => number): PlannedFault[] {
  const n = options.nemesis;
  const within = ([min, max]: [number, number]) => Math.round((min + random() * (max - min)) * 1000) / 1000;
  const out: PlannedFault[] = [];
  if (n.workerKills?.every) {
    const every = n.workerKills.every;
    for (let at = n.workerKills.from; at < LAST_FAULT_AT; at += within(every))
      out.push({ at: Math.round(at * 1000) / 1000, kind: "kill-worker" });
  } else if (n.workerKills) {
    out.push({ at: n.workerKills.from, kind: "kill-worker" });
  }
  for (const w of n.killLeaderAt) out.push({ at: within(w), kind: "kill-leader" });
  for (const w of n.restartNatsAt) out.push({ at: within(w), kind: "restart-nats" });
  for (const w of n.terminateDbAt) out.push({ at: within(w), kind: "terminate-db-connections" });
  if (n.pauseWorkerAt) out.push({ at: within(n.pauseWorkerAt), kind: "pause-worker" });
  for (const w of n.killNatsNodeAt ?? []) out.push({ at: within(w), kind: "kill-nats-node" });
  for (const w of n.restartNatsNodeAt ?? []) out.push({ at: within(w), kind: "restart-nats-node" });
  for (const w of n.restartPostgresAt ?? []) out.push({ at: within(w), kind: "restart-postgres" });
  return out.sort((a, b) => a.at - b.at);
}

/** What the sandbox says of one kind (`GET /__sandbox/truth`), its change round's share included. */
interface SandboxKindTruth {
  ids: string[];
  malformed: string[];
  orphans: string[];
  edited: string[];
  added: string[];
  deleted: string[];
}

const TENANT = "chaos";
const ACCOUNT = "sandbox";

export async function runChaos(
  options: ChaosOptions,
  log: (line: string) => void = console.log,
): Promise<ChaosReport> {
  const source = options.source ?? "crm";
  const random = rng(options.seed);
  const planned = plan(options, random);
  // Drawn after the plan, so a seed's faults are the same whether its run follows or not.
  const changeAt = options.follow
    ? options.follow.changeAt[0] + random() * (options.follow.changeAt[1] - options.follow.changeAt[0])
    : undefined;
  // One folder per run, even for a replayed seed: two runs' logs never interleave in one file.
  const runStamp = new Date().toISOString().replace(/[:.]/g, "-");
  const logDir = join(
    REPO_ROOT,
    ".artifacts",
    "logs",
    `chaos-${options.variant}-${options.seed}-${runStamp}`,
  );
  log(
    `chaos ${options.variant}: seed ${options.seed} (replay with CHAOS_SEED=${options.seed}); logs in ${logDir}`,
  );

  let nats: PrivateNats | undefined;
  let natsCluster: NatsCluster | undefined;
  if (options.nats === "cluster") natsCluster = await startNatsCluster({ logDir, log });
  else nats = await startPrivateNats({ logDir });
  const natsUrl = (natsCluster ?? nats)!.url;
  const pg = options.postgres === "private" ? await startPrivatePostgres({ logDir }) : undefined;
  /** Cluster nodes the nemesis killed, in order, and those still down. */
  const natsKilled: number[] = [];
  const natsDown: number[] = [];
  let h: Harness | undefined;
  let receiver: RunningReceiver | undefined;
  const receiverPort = options.follow?.webhooks ? await freePort() : undefined;
  const paused = new Set<ServiceProcess>();
  /** What the nemesis killed on purpose: any other process that exited crashed. */
  const killed = new Set<ServiceProcess>();
  const faults: InjectedFault[] = [];
  const startedAt = new Date();
  const timings: Record<string, number> = {};
  const mark = (what: string) => {
    timings[what] = Date.now() - startedAt.getTime();
  };
  let runStarted = 0;
  let natsStoreKept = true;
  /** When the restarted database server accepted connections again, and how long the run then took to move. */
  let postgresBackAt = 0;
  let resumedAfterPostgres: number | undefined;
  /** GetRun answers, while the database was down, that did not say "waiting for the database". */
  const postgresDownAnswers: string[] = [];
  try {
    h = await openClusterHarness({
      natsUrl,
      ...(pg ? { databaseBaseUrl: pg.url } : {}),
      logDir,
      coordinators: options.coordinators,
      workers: options.workers,
      laneWidth: options.laneWidth,
      sandbox: { ...options.sandbox, seed: options.seed },
      sandboxSource: source,
      env: {
        ...(natsCluster ? { DROVER_STREAM_REPLICAS: "3" } : {}),
        ...(receiverPort ? { DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${receiverPort}` } : {}),
        ...options.env,
        LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
      },
    });
    const harness = h;
    if (receiverPort)
      receiver = await startTestReceiver({
        databaseUrl: harness.testDb.url,
        queuePrefix: harness.queuePrefix,
        port: receiverPort,
        natsUrl,
        logLevel: "silent",
      });
    mark("clusterUp");
    const db = harness.database.db;
    const stream = `${harness.queuePrefix.toUpperCase().replace(/-/g, "_")}_TASKS`;
    await waitFor("a leader coordinator", 30_000, async () => (await leaderIndex(harness)) !== undefined);
    // The run's progress, read from whichever coordinator answers: the nemesis kills the one the
    // harness's client talks to, and while it restarted (~3 s) a small run went from 49 % of its
    // rows to its end unseen, past the next fault it was due to get.
    const readers = harness.cluster.coordinatorAddresses.map((address) =>
      createClient(RunService, address, { metadata: () => bearer(harness.cluster.adminToken) }),
    );
    const readRun = async (id: string): Promise<Run | undefined> => {
      for (const reader of readers) {
        const view = await reader
          .getRun({ runId: id }, { deadline: new Date(Date.now() + 1_000) })
          .catch(() => undefined);
        if (view?.run) return view.run;
      }
      return undefined;
    };

    const since = new Date();
    const { run } = await harness.client.startRun({
      tenantId: TENANT,
      source,
      sourceAccount: ACCOUNT,
      sourceConfig: {
        baseUrl: harness.cluster.sandboxUrl,
        apiToken: `chaos-${options.seed}`,
        settings: options.settings,
      },
      ...(options.follow ? { follow: true, followIntervalSeconds: options.follow.intervalSeconds } : {}),
    });
    const runId = run!.id;
    runStarted = Date.now();
    const sourceRowCount = Object.values((await harness.truth()).kinds).reduce((n, t) => n + t.ids.length, 0);
    /** Rows accounted for (every outcome) over the source's rows, from the last GetRun; 0 to 1. */
    let progress = 0;
    let tasksDone = 0;
    let lastMoveAt = Date.now();
    const observe = (r: Run) => {
      const rows = r.progress.reduce(
        (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        0,
      );
      const done = r.progress.reduce((n, p) => n + Number(p.tasksDone), 0);
      const next = Math.min(1, rows / Math.max(1, sourceRowCount));
      if (next !== progress || done !== tasksDone) {
        lastMoveAt = Date.now();
        // The first move after the database is back: how long the run took to notice by itself.
        if (postgresBackAt > 0 && resumedAfterPostgres === undefined && (next > progress || done > tasksDone))
          resumedAfterPostgres = lastMoveAt - postgresBackAt;
      }
      progress = next;
      tasksDone = done;
    };
    let currentFault = 0;
    log(`run ${runId} started; ${planned.length} faults planned`);

    let finished: Run | undefined;
    const record = (kind: FaultKind, target?: string, detail?: Record<string, unknown>) => {
      const f: InjectedFault = {
        kind,
        t: Date.now() - runStarted,
        progress: Math.round(progress * 1000) / 1000,
        planned: currentFault,
        at: new Date().toISOString(),
        ...(target ? { target } : {}),
        ...(detail ? { detail } : {}),
      };
      faults.push(f);
      log(
        `  +${(f.t / 1000).toFixed(1)}s at ${(f.progress * 100).toFixed(1)}% (due ${(f.planned * 100).toFixed(1)}%) ${kind}${target ? ` ${target}` : ""}${detail ? ` ${JSON.stringify(detail)}` : ""}`,
      );
    };

    /** A worker alive and not paused, preferring one that holds running tasks of the run. */
    const pickWorker = async (): Promise<ServiceProcess | undefined> => {
      const alive = [];
      for (const w of harness.cluster.workers) if (!paused.has(w) && (await isAlive(w))) alive.push(w);
      if (alive.length === 0) return undefined;
      // While the database restarts nobody can say who holds tasks: any live worker will do, and
      // the fault due then still strikes on time.
      const busy = await db
        .execute<{ worker: string }>(sql`
          select distinct split_part(locked_by, '/', 1) as worker from drover.tasks
           where run_id = ${runId}::uuid and status = 'running'`)
        .catch(() => []);
      const holding = alive.filter((w) => busy.some((b) => b.worker === w.name));
      const pool = holding.length > 0 ? holding : alive;
      return pool[Math.floor(random() * pool.length)];
    };

    /**
     * A fault strikes at once and is recorded then; what brings the cluster back (a replacement
     * worker, a restarted leader, a NATS server started again) goes on beside the nemesis rather
     * than before its next fault. The small schedule once waited ~3 s per recovery in a row, and a
     * 3,000-row run finished before its last planned fault (NATS's restart) was due.
     */
    const recoveries: Promise<void>[] = [];
    const recover = (work: () => Promise<void>): void => {
      const done = work().catch((err: Error) => log(`  nemesis: recovery failed: ${err.message}`));
      recoveries.push(done);
    };

    const inject = async (kind: FaultKind): Promise<void> => {
      switch (kind) {
        case "kill-worker": {
          const victim = await pickWorker();
          if (!victim) return;
          killed.add(victim);
          victim.signal("SIGKILL");
          await victim.exited;
          record(kind, victim.name, { replacement: "starting" });
          return recover(async () => {
            const replacement = await harness.cluster.addWorker();
            log(`    ${replacement.name} replaces ${victim.name}`);
          });
        }
        case "kill-leader": {
          const index = await leaderIndex(harness);
          if (index === undefined) return;
          const leader = harness.cluster.coordinators[index]!;
          killed.add(leader);
          leader.signal("SIGKILL");
          await leader.exited;
          record(kind, leader.name, { address: harness.cluster.coordinatorAddresses[index] });
          return recover(async () => {
            await harness.cluster.restartCoordinator(index);
            log(`    ${leader.name} restarted on ${harness.cluster.coordinatorAddresses[index]}`);
          });
        }
        case "restart-nats": {
          if (!nats) throw new Error('restart-nats needs nats: "server"');
          const before = await streamInfo(nats.url, stream);
          record(kind, `nats-server pid ${nats.pid}`, {
            downMs: options.nemesis.natsDownMs,
            messagesBefore: before?.messages ?? null,
          });
          return recover(async () => {
            await nats.restart(options.nemesis.natsDownMs);
            // Read before any coordinator could re-create it: the file store must have kept the stream.
            const after = await streamInfo(nats.url, stream);
            if (!after) natsStoreKept = false;
            log(
              `    nats-server back as pid ${nats.pid}; stream ${after ? `kept (${after.messages} messages)` : "LOST"}`,
            );
          });
        }
        case "terminate-db-connections": {
          const [row] = await db.execute<{ n: number }>(sql`
            select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
             where application_name = 'drover-worker' and datname = current_database()`);
          record(kind, "drover-worker backends", { terminated: row?.n ?? 0 });
          return;
        }
        case "kill-nats-node": {
          if (!natsCluster) throw new Error('kill-nats-node needs nats: "cluster"');
          // Only with every node up: two down of three leaves the stream without a quorum.
          if (natsDown.length > 0) {
            log(`  nemesis: kill-nats-node skipped, ${natsDown.length} node(s) still down`);
            return;
          }
          // The stream's leader takes every write: killing it forces an election mid-run. A node
          // killed before is spared, so a second kill takes another.
          const leader = await natsCluster.streamLeader(stream);
          const candidates = natsCluster.nodes.map((_, i) => i).filter((i) => !natsKilled.includes(i));
          const victim =
            leader !== undefined && candidates.includes(leader)
              ? leader
              : candidates[Math.floor(random() * candidates.length)];
          if (victim === undefined) return;
          const node = natsCluster.nodes[victim]!;
          const pid = node.pid;
          await natsCluster.kill(victim);
          natsKilled.push(victim);
          natsDown.push(victim);
          record(kind, `${node.name} (pid ${pid})`, {
            streamLeader: leader === undefined ? null : natsCluster.nodes[leader]!.name,
          });
          return;
        }
        case "restart-nats-node": {
          if (!natsCluster) throw new Error('restart-nats-node needs nats: "cluster"');
          const index = natsDown.shift();
          if (index === undefined) return;
          const node = natsCluster.nodes[index]!;
          // Awaited, unlike other recoveries: a node killed next while this one is not current yet
          // would leave the stream without a quorum.
          await natsCluster.start(index);
          const after = await streamInfo(natsCluster.url, stream);
          record(kind, node.name, { messages: after?.messages ?? null });
          log(`    ${node.name} back as pid ${node.pid} and current`);
          return;
        }
        case "restart-postgres": {
          if (!pg) throw new Error('restart-postgres needs postgres: "private"');
          const mode = random() < 0.5 ? "fast" : "crash";
          const downMs = options.nemesis.postgresDownMs ?? 2_000;
          record(kind, `postgres pid ${pg.pid}`, { mode, downMs });
          return recover(async () => {
            const downAt = Date.now();
            await pg.halt(mode);
            // What a caller is told meanwhile, by a coordinator that is up (the run page and
            // `drover status` show it): one restarting after the nemesis killed it is not asked.
            let answer = "no coordinator answered";
            for (const reader of readers) {
              const said = await reader.getRun({ runId }, { deadline: new Date(Date.now() + 3_000) }).then(
                () => "OK",
                (err: { code?: number; answered?: boolean; message?: string }) =>
                  err.answered === false ? undefined : `${err.code} ${err.message}`,
              );
              if (said !== undefined) {
                answer = said;
                break;
              }
            }
            if (!answer.includes("waiting for the database"))
              postgresDownAnswers.push(`GetRun while the database was down answered "${answer}"`);
            await new Promise((r) => setTimeout(r, Math.max(0, downMs - (Date.now() - downAt))));
            await pg.start();
            postgresBackAt = Date.now();
            log(`    postgres back as pid ${pg.pid} (${mode}); GetRun meanwhile: ${answer}`);
          });
        }
        case "pause-worker": {
          const victim = await pickWorker();
          if (!victim) return;
          victim.signal("SIGSTOP");
          paused.add(victim);
          record(kind, victim.name, { forMs: options.nemesis.pauseForMs });
          setTimeout(() => {
            victim.signal("SIGCONT");
            paused.delete(victim);
            log(
              `  +${((Date.now() - runStarted) / 1000).toFixed(1)}s resume-worker ${victim.name} (SIGCONT)`,
            );
          }, options.nemesis.pauseForMs).unref();
          return;
        }
      }
    };

    let nemesisDone = false;
    /** Every planned fault had its turn (injected, or skipped with a line in the log). */
    let nemesisFinished = false;
    const nemesis = (async () => {
      for (const fault of planned) {
        while (!nemesisDone && progress < fault.at) await sleep(100);
        if (nemesisDone) return;
        currentFault = fault.at;
        try {
          await inject(fault.kind);
        } catch (err) {
          log(`  nemesis: ${fault.kind} failed: ${(err as Error).message}`);
        }
      }
      nemesisFinished = true;
    })();

    // A follow run: the customer's round of changes, made while the faults come.
    let changedAt: Date | undefined;
    let completed = false;
    const changes = (async () => {
      if (changeAt === undefined) return;
      // Fed by webhooks, the round comes once the import and its own catch-up (pass 0) are over:
      // only the events (or the cutover's reconcile) can bring it then, not a pass of the import.
      const due = () =>
        options.follow?.webhooks
          ? nemesisFinished && lastSeen?.follow?.passes[0]?.finishedAt !== undefined
          : progress >= changeAt;
      while (!nemesisDone && !due()) await sleep(100);
      if (nemesisDone) return;
      const res = await fetch(`${harness.cluster.sandboxUrl}/__sandbox/changes`, { method: "POST" });
      const body = (await res.json()) as { applied: boolean; at: string };
      if (!body.applied) throw new Error("the sandbox applied no round of changes");
      changedAt = new Date(body.at);
      log(
        `  +${((Date.now() - runStarted) / 1000).toFixed(1)}s at ${(progress * 100).toFixed(1)}% changes applied at the source`,
      );
      if (options.follow?.webhooks) {
        // While the events become work: the leader that turns them into tasks, and a worker.
        await inject("kill-leader");
        await inject("kill-worker");
      }
    })().catch((err: Error) => log(`  changes failed: ${err.message}`));
    /**
     * With webhooks, the round has reached the product through its events (every edit on its
     * record, every addition in the ledger) before any pass could read it: passes are an hour
     * apart. Given up after WEBHOOK_CATCH_UP_MS, a problem of its own; the cutover's reconcile then
     * still has to leave the run exact.
     */
    let eventsLate = false;
    let feedMode = "";
    let lastEventCheck = 0;
    const eventsCaughtUp = async (): Promise<boolean> => {
      if (Date.now() - lastEventCheck < 1_000) return false;
      lastEventCheck = Date.now();
      // How the run follows, read before the cutover removes its webhooks.
      const [feed] = await db.execute<{ mode: string; reason: string | null }>(sql`
        select mode, reason from drover.run_webhooks where run_id = ${runId}::uuid`);
      feedMode = feed ? `${feed.mode}${feed.reason ? ` (${feed.reason})` : ""}` : "no webhooks row";
      const truth = (await harness.truth()) as unknown as { kinds: Record<string, SandboxKindTruth> };
      const scope = { tenantId: TENANT, sourceAccount: ACCOUNT };
      const missing = await midRunChangeProblems(db, scope, truth.kinds, Object.keys(CHANGED_COLUMN));
      if (missing.length === 0) return true;
      if (Date.now() - changedAt!.getTime() < WEBHOOK_CATCH_UP_MS) return false;
      eventsLate = true;
      log(`  the webhooks did not bring the round within ${WEBHOOK_CATCH_UP_MS / 1000} s: ${missing[0]}`);
      return true;
    };
    /**
     * Cutover, once the faults are all in and a pass begun after the round has finished (it has seen
     * every change): CompleteRun through whichever coordinator answers.
     */
    const completeWhenCaughtUp = async (r: Run): Promise<void> => {
      if (!options.follow || completed || !nemesisFinished || !changedAt) return;
      const caughtUp = options.follow.webhooks
        ? await eventsCaughtUp()
        : r.follow?.passes.some(
            (p) => p.finishedAt && p.startsAt && timestampDate(p.startsAt).getTime() > changedAt!.getTime(),
          );
      if (!caughtUp) return;
      for (const reader of readers) {
        const ok = await reader
          .completeRun({ runId }, { deadline: new Date(Date.now() + 3_000) })
          .then(() => true)
          .catch(() => false);
        if (!ok) continue;
        completed = true;
        log(`  +${((Date.now() - runStarted) / 1000).toFixed(1)}s CompleteRun: cutover`);
        return;
      }
    };

    let lastSeen: Run | undefined;
    const problems: string[] = [];
    try {
      finished = await waitFor("the run to end", options.runDeadlineMs, async () => {
        const r = await readRun(runId);
        if (r) {
          lastSeen = r;
          observe(r);
          await completeWhenCaughtUp(r);
        }
        if (r && TERMINAL.includes(r.status)) return r;
        if (Date.now() - lastMoveAt > options.stallTimeoutMs)
          throw new Error(
            `the run made no progress for ${options.stallTimeoutMs / 1000} s (${(progress * 100).toFixed(1)}% of ${sourceRowCount} rows accounted for, ${tasksDone} tasks done)`,
          );
        return undefined;
      }).catch(async (err: Error) => {
        // Given up: still account for what is there, and say so.
        problems.push(`${err.message} (the run was ${lastSeen ? RunStatus[lastSeen.status] : "unknown"})`);
        return (await readRun(runId)) ?? lastSeen!;
      });
    } finally {
      nemesisDone = true;
      await nemesis;
      await changes;
      await Promise.all(recoveries);
      for (const reader of readers) reader.close();
      for (const w of paused) w.signal("SIGCONT");
      paused.clear();
      await (natsCluster ?? nats)!.ensureRunning();
      await pg?.ensureRunning();
    }
    const runMs = Date.now() - runStarted;
    mark("runEnded");
    log(
      `run ${RunStatus[finished.status]} after ${(runMs / 1000).toFixed(1)}s; ${faults.length} of ${planned.length} planned faults injected; checking`,
    );

    // The checker: the ledger and notes against the sandbox's truth, then VerifyRun.
    const truth = (await harness.truth()) as unknown as { kinds: Record<string, SandboxKindTruth> };
    const scope = { tenantId: TENANT, sourceAccount: ACCOUNT };
    // A follow run owes the source as it is after the round: less what was deleted before it was read.
    const owed = options.follow ? await withoutUnseenDeletions(db, scope, truth.kinds) : truth.kinds;
    const accounts = await accountFor(
      db,
      { ...scope, source, since },
      owed,
      source === "hubspot" ? HUBSPOT_TABLES : CRM_TABLES,
    );
    const runEnded = TERMINAL.includes(finished.status);
    problems.push(...accountingProblems(accounts, { runEnded }));
    const malformedReasons: Record<string, number> = {};
    let malformedWithoutReason = 0;
    for (const [kind, t] of Object.entries(truth.kinds)) {
      if (t.malformed.length === 0) continue;
      const rows = await db.execute<{ subject_id: string; reason: string }>(sql`
        select distinct on (subject_id) subject_id, reason from drover.notes
         where run_id = ${runId}::uuid and kind = ${kind} and level = 'error' and subject_id = any(${sql.param(t.malformed)}::text[])
         order by subject_id, id`);
      const withReason = new Set(rows.filter((r) => r.reason.trim() !== "").map((r) => r.subject_id));
      for (const r of rows) {
        const key = `${kind}: ${r.reason.replace(/"[^"]*"/g, '"…"')}`;
        malformedReasons[key] = (malformedReasons[key] ?? 0) + 1;
      }
      const missing = t.malformed.filter((id) => !withReason.has(id));
      malformedWithoutReason += missing.length;
      if (missing.length > 0)
        problems.push(`${kind}: ${missing.length} malformed row(s) without a reason: ${missing.join(", ")}`);
    }
    // A follow pass's update of a held row counts as "already here": for a follow run, writes twice
    // over show in the ledger and the product (duplicated) instead.
    const rewritten = options.follow ? 0 : finished.progress.reduce((n, p) => n + Number(p.alreadyHere), 0);
    if (rewritten > 0)
      problems.push(`${rewritten} row(s) were written again after a commit (already here within the run)`);
    if (options.follow) {
      if (!changedAt) problems.push("the round of changes was never applied at the source");
      else if (!completed)
        problems.push("the follow run was never completed (no pass caught up with the changes)");
      if (eventsLate)
        problems.push(
          `the webhooks did not bring the round of changes within ${WEBHOOK_CATCH_UP_MS / 1000} s`,
        );
      if (options.follow.webhooks && feedMode !== "webhooks")
        problems.push(`the run did not follow by webhooks: ${feedMode || "never checked"}`);
      problems.push(...(await midRunChangeProblems(db, scope, truth.kinds, Object.keys(CHANGED_COLUMN))));
      problems.push(...(await sourceDeletionProblems(db, scope, truth.kinds)).problems);
    }
    if (finished.status !== RunStatus.SUCCEEDED)
      problems.push(`the run ended ${RunStatus[finished.status]}: ${finished.error}`);
    if (!natsStoreKept) problems.push("the task stream did not survive the NATS restart");
    if (natsCluster) {
      const replicas = (await streamInfo(natsCluster.url, stream))?.replicas;
      if (replicas !== 3)
        problems.push(`the task stream kept ${replicas ?? "no"} replicas on the cluster, not 3`);
    }
    for (const p of [...harness.cluster.workers, ...harness.cluster.coordinators]) {
      if (killed.has(p) || (await isAlive(p))) continue;
      problems.push(
        `${p.name} exited on its own (${await p.exited}): it crashed; see ${join(logDir, `${p.name}.log`)}`,
      );
    }

    mark("accounted");
    let verification: Verification | undefined;
    try {
      const response = await harness.client.verifyRun(
        { runId },
        { deadline: new Date(Date.now() + options.verifyDeadlineMs) },
      );
      verification = response.verification;
    } catch (err) {
      problems.push(`VerifyRun failed: ${(err as Error).message}`);
    }
    mark("verified");
    const verificationMismatches =
      verification?.kinds.flatMap((k) => k.mismatches.map((m) => `${k.kind} ${m}`)) ?? [];
    if (verification?.error) problems.push(`verification could not finish: ${verification.error}`);
    problems.push(...verificationMismatches.map((m) => `verification mismatch: ${m}`));

    const faultCounts = Object.fromEntries(
      FAULT_KINDS.map((k) => [k, faults.filter((f) => f.kind === k).length]),
    ) as Record<FaultKind, number>;
    for (const k of new Set(planned.map((f) => f.kind)))
      if (faultCounts[k] === 0) problems.push(`the nemesis never injected ${k} during the run`);
    // Once the database accepts connections again, the run goes on by itself: no operator, no resume.
    problems.push(...postgresDownAnswers);
    if (faultCounts["restart-postgres"] > 0 && runEnded) {
      if (resumedAfterPostgres === undefined)
        problems.push("the run never moved again after the database server restarted");
      else if (resumedAfterPostgres > POSTGRES_RESUME_MS)
        problems.push(
          `the run moved again ${(resumedAfterPostgres / 1000).toFixed(1)} s after the database accepted connections (at most ${POSTGRES_RESUME_MS / 1000} s)`,
        );
    }
    // Every fault planned is due before LAST_FAULT_AT of the run's progress: one not injected means
    // the run outran the nemesis, and the run proved less than its seed promised.
    if (faults.length < planned.length)
      problems.push(
        `the nemesis injected ${faults.length} of the ${planned.length} faults it planned (${planned
          .slice(faults.length)
          .map((f) => `${f.kind} at ${(f.at * 100).toFixed(0)}%`)
          .join(", ")} never came)`,
      );

    const sum = (f: (a: KindAccount) => number) => accounts.reduce((n, a) => n + f(a), 0);
    const checks: ChaosReport["checks"] = {
      runSucceeded: finished.status === RunStatus.SUCCEEDED,
      lost: runEnded ? sum((a) => a.lost.length) : 0,
      notReached: runEnded ? 0 : sum((a) => a.lost.length),
      duplicated: sum((a) => a.duplicated),
      unexpected: sum((a) => a.unexpected.length),
      malformedNotFailed: sum((a) => a.malformedNotFailed.length),
      malformedWithoutReason,
      rewritten,
      verificationMismatches: verificationMismatches.length,
      verificationOk: verification?.ok === true,
      natsStoreKept,
    };
    const artifactDir = join(REPO_ROOT, ".artifacts", "chaos");
    mkdirSync(artifactDir, { recursive: true });
    const artifact = join(artifactDir, `${options.seed}.json`);
    const report: ChaosReport = {
      seed: options.seed,
      variant: options.variant,
      ...(resumedAfterPostgres !== undefined ? { resumedAfterPostgresMs: resumedAfterPostgres } : {}),
      replay: `CHAOS_SEED=${options.seed}`,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      runMs,
      timings,
      options,
      plannedFaults: planned,
      faults,
      faultCounts,
      run: {
        id: runId,
        status: RunStatus[finished.status],
        error: finished.error,
        progress: Object.fromEntries(
          finished.progress.map((p) => [
            p.kind,
            {
              imported: Number(p.imported),
              matched: Number(p.matched),
              alreadyHere: Number(p.alreadyHere),
              skipped: Number(p.skipped),
              failed: Number(p.failed),
            },
          ]),
        ),
      },
      sourceRows: Object.values(truth.kinds).reduce((n, t) => n + t.ids.length, 0),
      accounts: accounts.map((a) => ({ ...a, malformed: truth.kinds[a.kind]?.malformed.length ?? 0 })),
      malformedReasons,
      verification: verification
        ? {
            ok: verification.ok,
            error: verification.error,
            kinds: Object.fromEntries(
              verification.kinds.map((k) => [
                k.kind,
                {
                  sourceCount: Number(k.sourceCount),
                  ledgerCount: Number(k.ledgerCount),
                  failedCount: Number(k.failedCount),
                  sampled: Number(k.sampled),
                  mismatches: k.mismatches,
                },
              ]),
            ),
          }
        : undefined,
      checks,
      problems,
      passed: problems.length === 0 && checks.verificationOk,
      logDir,
      artifact,
    };
    writeFileSync(artifact, `${JSON.stringify(report, null, 2)}\n`);
    log(
      `chaos ${options.variant} seed ${options.seed}: ${report.sourceRows} source rows, faults ${JSON.stringify(faultCounts)}; ` +
        `lost ${checks.lost}, not reached ${checks.notReached}, duplicated ${checks.duplicated}, unexpected ${checks.unexpected}, verification mismatches ${checks.verificationMismatches}, ` +
        `malformed not failed ${checks.malformedNotFailed}; ${report.passed ? "PASSED" : "FAILED"}; ${artifact}`,
    );
    return report;
  } finally {
    for (const w of paused) w.signal("SIGCONT");
    await receiver?.stop().catch(() => {});
    // NATS must be up for the harness to delete its stream, and is stopped after, whatever happened.
    await (natsCluster ?? nats)!.ensureRunning().catch(() => {});
    await pg?.ensureRunning().catch(() => {});
    await h?.close().catch((err) => log(`closing the cluster failed: ${(err as Error).message}`));
    await (natsCluster ?? nats)!.stop();
    await pg?.stop();
    log(
      `chaos ${options.variant} seed ${options.seed}: done in ${((Date.now() - startedAt.getTime()) / 1000).toFixed(1)}s ${JSON.stringify(timings)}`,
    );
  }
}

/**
 * How long a webhook-fed follow run may take to bring a round of changes into the product: the
 * sandbox's deliveries retry after 3, 30 and 150 s, and the faults (a receiver cut off by a NATS
 * restart, the database restarting) may cost a retry or two.
 */
const WEBHOOK_CATCH_UP_MS = 120_000;

/** How soon a run must move again, by itself, once its restarted database accepts connections. */
const POSTGRES_RESUME_MS = 15_000;

const TERMINAL: readonly RunStatus[] = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED];

/** Which coordinator leads, by the address it announced. */
async function leaderIndex(h: Harness): Promise<number | undefined> {
  const address = await leaderAddress(h.database.db);
  if (!address) return undefined;
  const index = h.cluster.coordinatorAddresses.indexOf(address);
  if (index < 0 || !(await isAlive(h.cluster.coordinators[index]!))) return undefined;
  return index;
}

async function isAlive(p: ServiceProcess): Promise<boolean> {
  return Promise.race([
    p.exited.then(() => false),
    new Promise<boolean>((r) => setTimeout(() => r(true), 5)),
  ]);
}

async function streamInfo(
  url: string,
  stream: string,
): Promise<{ messages: number; replicas: number } | undefined> {
  const nc = await connect({ servers: natsServerList(url), timeout: 3_000, maxReconnectAttempts: 0 });
  try {
    const info = await (await jetstreamManager(nc)).streams.info(stream);
    return { messages: info.state.messages, replicas: info.config.num_replicas };
  } catch {
    return undefined;
  } finally {
    await nc.close();
  }
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined | false>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
