import { type MetricsServer, serveMetrics } from "@drover/telemetry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

/**
 * /metrics as Prometheus scrapes it, after a real run: the coordinator and the worker share this
 * process, so one scrape shows both services' series.
 */
let c: Cluster;
let server: MetricsServer;

beforeAll(async () => {
  c = await startCluster({
    workers: 1,
    sandbox: { malformedRate: 0.05, burstLimit: 200, dailyBudget: 5_000_000 },
  });
  server = await serveMetrics({ host: "127.0.0.1", port: 0 });
});
afterAll(async () => {
  await server?.close();
  await c?.close();
});

async function scrape(): Promise<string> {
  const res = await fetch(server.url);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return res.text();
}

/** The value of one series, e.g. value(text, 'drover_rows_total{kind="persons",outcome="created"}'). */
function value(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("/metrics", { timeout: 120_000 }, () => {
  it("counts rows by outcome, times windows and lease waits, and keeps the budget's remainder", async () => {
    const run = await c.start("metrics-tenant", ["organizations", "persons"]);
    await untilFinished(c, run.id);
    await c.workers[0]!.stop(); // flushes the budget readings to the coordinator
    const text = await scrape();

    const [counts] = await c.database.sql<{ created: number; failed: number }[]>`
      select coalesce(sum((stats ->> 'created')::int), 0)::int as created,
             coalesce(sum((stats ->> 'failed')::int), 0)::int as failed
        from drover.tasks where run_id = ${run.id}::uuid and kind = 'persons'`;
    // Other test files run in other processes: this process's counters are this file's runs alone.
    expect(value(text, 'drover_rows_total{kind="persons",outcome="created"}')).toBe(counts!.created);
    expect(value(text, 'drover_rows_total{kind="persons",outcome="failed"}')).toBe(counts!.failed);
    expect(counts!.failed).toBeGreaterThan(0);

    expect(text).toContain("# TYPE drover_window_duration_seconds histogram");
    const windows = value(text, 'drover_window_duration_seconds_count{kind="persons"}')!;
    expect(windows).toBeGreaterThan(0);
    expect(value(text, 'drover_window_duration_seconds_bucket{kind="persons",le="+Inf"}')).toBe(windows);

    expect(text).toContain("# TYPE drover_worker_lease_wait_seconds histogram");
    expect(value(text, "drover_worker_lease_wait_seconds_count")).toBeGreaterThan(0);
    expect(text).toContain("# TYPE drover_worker_deferrals_total counter");
    expect(value(text, "drover_worker_deferrals_total")).toBe(0);
    const remaining = value(text, 'drover_budget_daily_remaining{account="acct"}');
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThan(5_000_000);
  });

  it("reads tasks by status of live runs from the database at each scrape", async () => {
    // No worker is left: the run's first tasks wait, pending.
    const run = await c.start("metrics-waiting", ["organizations"]);
    const [row] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from drover.tasks where run_id = ${run.id}::uuid and status = 'pending'`;
    expect(row!.n).toBeGreaterThan(0);
    const text = await scrape();
    expect(text).toContain("# TYPE drover_tasks gauge");
    expect(value(text, 'drover_tasks{status="pending"}')).toBe(row!.n);
    expect(value(text, 'drover_tasks{status="running"}')).toBe(0);
    expect(value(text, 'drover_runs{status="succeeded"}')).toBe(1);

    await c.client.stopRun({ runId: run.id });
    await untilFinished(c, run.id);
    expect(value(await scrape(), 'drover_tasks{status="pending"}')).toBe(0);
  });
});
