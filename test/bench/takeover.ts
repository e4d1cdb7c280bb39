import type { SizeOptions } from "./fairness.js";
import { openBenchCluster, sleep } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * takeover_after_kill_s: seconds from the SIGKILL of a worker holding tasks mid-way to the first
 * window another worker commits for one of those tasks (or its finish, for a task with nothing
 * left to write). Production defaults: DROVER_WORKER_LIVENESS_MS 10 s, the reaper every 2 s, the
 * stale-lock threshold 90 s (what the takeover waited for before the liveness record). 2 workers
 * × lane 4, one run of organizations and persons (6,000 + 3,000 rows; `quick` a tenth) with 40 ms
 * of latency, windows of 25 rows so a task is caught between two of them. Goal <= 20.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;

export const takeoverScenario: Scenario = {
  name: "takeover",
  selects: ["takeover_after_kill_s"],
  async run(options: SizeOptions = {}): Promise<ScenarioResult> {
    const scale = options.quick ? 0.1 : 1;
    const sandbox = {
      seed: 23,
      organizations: Math.round(3_000 * scale),
      persons: Math.round(6_000 * scale),
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
      "mail-per-deal-max": 0,
      "latency-ms": 40,
      "burst-limit": 0,
    };
    const settings = { pageSize: "100", partitions: "2", windowSize: "25" };
    const bench = await openBenchCluster({
      name: "takeover",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
    });
    const sql = bench.database.sql;
    try {
      const { run } = await bench.client.startRun({
        tenantId: "takeover",
        source: "crm",
        sourceAccount: "takeover",
        kinds: ["organizations", "persons"],
        sourceConfig: { baseUrl: bench.cluster.sandboxUrl, apiToken: "bench-api-token", settings },
      });
      const runId = run!.id;
      // A worker holding a task past its first window, frozen first so it cannot finish its tasks
      // between the look and the kill.
      const deadline = Date.now() + 120_000;
      let victim: { name: string; tasks: string[]; killedAt: Date } | undefined;
      while (!victim) {
        if (Date.now() > deadline) throw new Error("no worker held a task mid-way within 2 minutes");
        const [busy] = await sql<{ locked_by: string }[]>`
          select locked_by from drover.tasks
           where run_id = ${runId}::uuid and status = 'running' and processed_offset > 0 limit 1`;
        const worker = busy && bench.cluster.workers.find((w) => w.name === busy.locked_by.split("/")[0]);
        if (!worker) {
          await sleep(50);
          continue;
        }
        worker.signal("SIGSTOP");
        const held = await sql<{ id: string }[]>`
          select id::text from drover.tasks
           where run_id = ${runId}::uuid and status = 'running' and locked_by like ${`${worker.name}/%`}`;
        if (held.length === 0) {
          worker.signal("SIGCONT");
          continue;
        }
        // The database's clock, as the commits it is compared with.
        const [clock] = await sql<{ now: Date }[]>`select clock_timestamp() as now`;
        worker.signal("SIGKILL");
        victim = { name: worker.name, tasks: held.map((t) => t.id), killedAt: clock!.now };
        await worker.exited;
      }
      const killedAt = victim.killedAt;
      let takenOver: { seconds: number; task: string } | undefined;
      const giveUp = Date.now() + 180_000;
      while (!takenOver) {
        if (Date.now() > giveUp)
          throw new Error("no other worker resumed the killed worker's tasks within 3 minutes");
        const [first] = await sql<{ seconds: number; task: string }[]>`
          select extract(epoch from min(at) - ${killedAt}::timestamptz)::float8 as seconds,
                 (array_agg(task order by at))[1] as task from (
            select committed_at as at, task_id::text as task from drover.window_commits
             where task_id = any(${victim.tasks}::bigint[]) and committed_at > ${killedAt}
            union all
            select finished_at, id::text from drover.tasks
             where id = any(${victim.tasks}::bigint[]) and finished_at > ${killedAt}) firsts
          having count(*) > 0`;
        if (first) takenOver = first;
        else await sleep(100);
      }
      const seconds = takenOver.seconds;
      await bench.client.stopRun({ runId });
      return {
        figures: { takeover_after_kill_s: seconds },
        settings: { workers: WORKERS, laneWidth: LANE_WIDTH, sandbox, crmSettings: settings, defaults: true },
        details: {
          killed: victim.name,
          heldTasks: victim.tasks,
          firstResumed: takenOver.task,
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
