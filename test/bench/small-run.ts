import { join } from "node:path";
import { type ServiceProcess, spawnService } from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import type { SizeOptions } from "./fairness.js";
import { API_TOKEN, openBenchCluster, SOURCE, sleep, untilVerified } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * small_run_slowdown: the wall time of a 2,000-row run started while a 20× larger run of another
 * tenant is under way, ÷ its wall time alone on the same pool. The large tenant goes wide (8
 * partitions per list: 16 chains, twice the pool's 8 slots), the small one keeps the defaults (one
 * chain per list). Each tenant reads its own account: two sandboxes, 40,000 and 2,000 rows of
 * organizations and persons, 20 ms of latency, no rate limit. The large run is stopped once the
 * small one has ended (it must still be running then, or the figure would not be measured under
 * contention). Goal <= 1.5.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;
const SMALL = { organizations: 650, persons: 1_350 };
const LARGE_FACTOR = 20;

function sandboxFlags(rows: { organizations: number; persons: number }, seed: number) {
  return {
    seed,
    ...rows,
    deals: 0,
    leads: 0,
    activities: 0,
    notes: 0,
    "mail-per-deal-max": 0,
    "latency-ms": 20,
    "burst-limit": 0,
  };
}

export const smallRunScenario: Scenario = {
  name: "small_run",
  selects: ["small_run_slowdown"],
  async run(options: SizeOptions = {}): Promise<ScenarioResult> {
    const scale = options.quick ? 0.1 : 1;
    const small = {
      organizations: Math.round(SMALL.organizations * scale),
      persons: Math.round(SMALL.persons * scale),
    };
    const large = {
      organizations: small.organizations * LARGE_FACTOR,
      persons: small.persons * LARGE_FACTOR,
    };
    const pageSize = options.quick ? "25" : "100";
    const smallSettings = { pageSize };
    const largeSettings = { pageSize, partitions: "8" };
    const kinds = ["organizations", "persons"];
    const bench = await openBenchCluster({
      name: "small-run",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox: sandboxFlags(large, 5),
      env: { DROVER_REAPER_INTERVAL_MS: "1000" },
    });
    let smallSandbox: ServiceProcess | undefined;
    try {
      smallSandbox = await spawnService({
        name: "crm-sandbox-small",
        entry: "packages/crm-sandbox/src/main.ts",
        args: [
          "--port",
          "0",
          ...Object.entries(sandboxFlags(small, 6)).flatMap(([k, v]) => [`--${k}`, String(v)]),
        ],
        readyEvent: "listening",
        logDir: join(bench.cluster.logDir),
      });
      const smallSource = { name: SOURCE, baseUrl: String(smallSandbox.ready.url), apiToken: API_TOKEN };
      const smallRun = (tenantId: string) =>
        bench.runToEnd(
          { tenantId, sourceAccount: "small-account", kinds, settings: smallSettings, source: smallSource },
          600_000,
        );

      const alone = await smallRun("small-alone");
      await untilVerified(bench.database.sql, alone.run.id);

      const { run: largeRun } = await bench.client.startRun({
        tenantId: "large-tenant",
        source: SOURCE,
        sourceAccount: "large-account",
        kinds,
        sourceConfig: { baseUrl: bench.cluster.sandboxUrl, apiToken: API_TOKEN, settings: largeSettings },
      });
      const largeId = largeRun!.id;
      const largeRows = large.organizations + large.persons;
      // Under way: a tenth of its rows written, every slot it may take taken.
      const deadline = Date.now() + 300_000;
      for (;;) {
        const [r] = await bench.database.sql<{ rows: number }[]>`
          select coalesce(sum(rows), 0)::int as rows from drover.window_commits where run_id = ${largeId}::uuid`;
        if (r!.rows >= largeRows / 10) break;
        if (Date.now() > deadline) throw new Error("the large run did not get under way within 5 minutes");
        await sleep(100);
      }
      // What the pool did meanwhile, every 100 ms: the large run's running tasks against its share
      // and ceiling, and whether a worker said it was busy (the dispatcher then reserves shares).
      const pool: {
        at: number;
        largeRunning: number;
        share: number | null;
        ceiling: number | null;
        busy: boolean;
      }[] = [];
      let sampling = true;
      const sampled = (async () => {
        const t0 = Date.now();
        while (sampling) {
          const [p] = await bench.database.sql<
            { running: number; share: number | null; ceiling: number | null; busy: boolean }[]
          >`
            select (select count(*)::int from drover.tasks where run_id = r.id and status = 'running') as running,
                   r.fair_share as share, r.share_ceiling as ceiling,
                   (select coalesce(bool_or(busy), false) from drover.workers where expires_at > now()) as busy
              from drover.runs r where r.id = ${largeId}::uuid`;
          pool.push({
            at: (Date.now() - t0) / 1000,
            largeRunning: p!.running,
            share: p!.share,
            ceiling: p!.ceiling,
            busy: p!.busy,
          });
          await sleep(100);
        }
      })();
      const contended = await smallRun("small-contended").finally(() => {
        sampling = false;
      });
      await sampled;
      const [largeState] = await bench.database.sql<{ status: string; rows: number }[]>`
        select r.status, (select coalesce(sum(rows), 0)::int from drover.window_commits w where w.run_id = r.id) as rows
          from drover.runs r where r.id = ${largeId}::uuid`;
      if (largeState!.status !== "running")
        throw new Error(
          `the large run was ${largeState!.status} before the small one ended: the small run was not measured under contention`,
        );
      await bench.client.stopRun({ runId: largeId });
      for (;;) {
        const { run } = await bench.client.getRun({ runId: largeId });
        if (run!.status === RunStatus.STOPPED) break;
        await sleep(200);
      }
      // Where the small run's time went: waiting to be claimed (dispatch, the queue) or running.
      const split = async (runId: string) => {
        const [r] = await bench.database.sql<{ tasks: number; waited_s: number; ran_s: number }[]>`
          select count(*)::int as tasks,
                 round(sum(extract(epoch from started_at - greatest(created_at, available_at)))::numeric, 2)::float8 as waited_s,
                 round(sum(extract(epoch from finished_at - started_at))::numeric, 2)::float8 as ran_s
            from drover.tasks where run_id = ${runId}::uuid and finished_at is not null`;
        // Each task: when it was due, published, claimed and ended (seconds from the run's first task).
        const tasks = await bench.database.sql<Record<string, unknown>[]>`
          with t0 as (select min(created_at) as at from drover.tasks where run_id = ${runId}::uuid)
          select t.kind, t.phase, t.seed_key as "seedKey", t.attempts,
                 round(extract(epoch from greatest(t.created_at, t.available_at) - t0.at)::numeric, 2)::float8 as due,
                 round(extract(epoch from t.dispatched_at - t0.at)::numeric, 2)::float8 as published,
                 round(extract(epoch from t.started_at - t0.at)::numeric, 2)::float8 as claimed,
                 round(extract(epoch from t.finished_at - t0.at)::numeric, 2)::float8 as ended
            from drover.tasks t, t0 where t.run_id = ${runId}::uuid order by t.id`;
        return { ...r, byTask: tasks };
      };
      const aloneSeconds = (alone.finishedAt - alone.startedAt) / 1000;
      const contendedSeconds = (contended.finishedAt - contended.startedAt) / 1000;
      return {
        figures: { small_run_slowdown: contendedSeconds / aloneSeconds },
        settings: {
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          kinds,
          small: { rows: small, crmSettings: smallSettings },
          large: { rows: large, crmSettings: largeSettings },
        },
        details: {
          aloneSeconds,
          contendedSeconds,
          aloneTasks: await split(alone.run.id),
          contendedTasks: await split(contended.run.id),
          largeRowsWhenSmallEnded: largeState!.rows,
          poolDuringContendedRun: pool,
          largeRows,
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      await smallSandbox?.stop();
      bench.closeLater();
    }
  },
};
